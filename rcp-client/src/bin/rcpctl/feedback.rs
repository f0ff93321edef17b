//! `rcpctl feedback`: signals about earlier hits sent with `feedback` (§7.16). Each flag names a
//! hit; the flags naming the same hit make one signal, in the order the hits first appear.
//!
//! With `--registry` the federation core routes each signal back to the engines that returned
//! its hit. It knows that from the answers it relayed itself (its origin ledger), which a new
//! `rcpctl` process has none of: a shared id is then not routed, and says so. In a registry
//! with `"corpora": "distinct"` an id is `<engine>:<id>` and routes by its namespace.

use clap::Args;
use rcp_client::registry::Corpora;
use rcp_wire::capabilities::Capability;
use rcp_wire::feedback::{FeedbackParams, FeedbackResult, Signal};
use rcp_wire::message::RequestId;
use rcp_wire::request;
use serde_json::{Value, json};

use crate::federated::{self, Fed};
use crate::out::outln;
use crate::print_json;
use crate::target::{self, Auth, Target};

/// `rcpctl feedback` flags.
#[derive(Args)]
pub(crate) struct FeedbackArgs {
    #[command(flatten)]
    pub target: Target,
    /// The trajectory the hits came from (§7.7.3).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// The query the hits answered.
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// The hit was placed in the final context (repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub used: Vec<String>,
    /// The hit was cited in the answer (repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub cited: Vec<String>,
    /// A judge found the hit helpful (repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub helpful: Vec<String>,
    /// A judge found the hit not helpful (repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub unhelpful: Vec<String>,
    /// A scalar reward for a hit, HIT_ID=R with R in [-1, 1] (repeatable).
    #[arg(long, value_name = "HIT_ID=R", value_parser = reward)]
    pub reward: Vec<(String, f64)>,
    /// The hit is suspected of poisoning the corpus (§15.3; repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub poison: Vec<String>,
    /// The hit is suspected of carrying a prompt injection (§15.2; repeatable).
    #[arg(long, value_name = "HIT_ID")]
    pub injection: Vec<String>,
}

/// `HIT_ID=R` with `R` a number in `[-1, 1]` (the id may itself contain `=`: the last one splits).
fn reward(s: &str) -> Result<(String, f64), String> {
    let (id, r) = s.rsplit_once('=').ok_or_else(|| format!("'{s}': expected HIT_ID=R, e.g. doc-7=0.8"))?;
    if id.is_empty() {
        return Err(format!("'{s}': the hit id before '=' is empty"));
    }
    let r: f64 = r.trim().parse().map_err(|_| format!("'{s}': the reward '{r}' is not a number"))?;
    if !(-1.0..=1.0).contains(&r) {
        return Err(format!("'{s}': a reward lies in [-1, 1] (§7.16)"));
    }
    Ok((id.to_owned(), r))
}

impl FeedbackArgs {
    /// One signal per hit named, carrying every flag given for it.
    pub(crate) fn signals(&self) -> Vec<Signal> {
        let mut out: Vec<Signal> = Vec::new();
        let mut at = |id: &str| -> usize {
            match out.iter().position(|s| s.hit_id == RequestId::from(id)) {
                Some(i) => i,
                None => {
                    out.push(Signal {
                        hit_id: id.into(),
                        used: None,
                        cited: None,
                        helpful: None,
                        reward: None,
                        poison_suspected: None,
                        injection_suspected: None,
                    });
                    out.len() - 1
                }
            }
        };
        let mut marks: Vec<(usize, &str, f64)> = Vec::new();
        let flags: [(&[String], &str); 6] = [
            (&self.used, "used"),
            (&self.cited, "cited"),
            (&self.helpful, "helpful"),
            (&self.unhelpful, "unhelpful"),
            (&self.poison, "poison"),
            (&self.injection, "injection"),
        ];
        for (ids, flag) in flags {
            for id in ids {
                marks.push((at(id), flag, 0.0));
            }
        }
        for (id, r) in &self.reward {
            marks.push((at(id), "reward", *r));
        }
        for (i, flag, r) in marks {
            let s = &mut out[i];
            match flag {
                "used" => s.used = Some(true),
                "cited" => s.cited = Some(true),
                "helpful" => s.helpful = Some(true),
                "unhelpful" => s.helpful = Some(false),
                "poison" => s.poison_suspected = Some(true),
                "injection" => s.injection_suspected = Some(true),
                _ => s.reward = Some(r),
            }
        }
        out
    }
}

/// Sends the signals and prints how many the engine accepted.
pub(crate) async fn run(args: &FeedbackArgs, auth: &Auth, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let signals = args.signals();
    if signals.is_empty() {
        return Err("no signal to send: name a hit with --used, --cited, --helpful, --unhelpful, --reward ID=R, \
                    --poison or --injection"
            .into());
    }
    let both: Vec<&String> = args.helpful.iter().filter(|id| args.unhelpful.contains(id)).collect();
    if let Some(id) = both.first() {
        return Err(format!("hit '{id}' is given both --helpful and --unhelpful: pick one").into());
    }
    let sent = signals.len();
    let params = FeedbackParams { session_id: args.session.clone(), query: args.query.clone(), signals, meta: None };
    if let Some(path) = &args.target.registry {
        let fed = federated::open(path, auth).await?;
        let res = fed.fed.feedback(params).await;
        if let Ok(m) = &res {
            // Unrouted signals are explained below, with the reason for this registry.
            let notes: Vec<String> = m.notes.iter().filter(|n| !n.ends_with(": not routed")).cloned().collect();
            fed.merged(None, &notes);
        }
        let outcome = res.map(|m| report(&fed, m.answer, sent, json));
        fed.close().await;
        return outcome?;
    }
    let c = target::connect(&args.target, auth, Some(Capability::Feedback)).await?;
    let res = c.request::<request::Feedback>(&params).await;
    let _ = c.shutdown().await;
    let res = res?;
    if json {
        print_json(&json!({"sent": sent, "accepted": res.accepted}));
    } else {
        outln!("accepted {} of {sent} signals", res.accepted);
    }
    Ok(())
}

/// Prints the federation's answer to `sent` signals: what each engine accepted (stderr), the
/// hits it could not route and why; none routed at all is an error.
fn report(fed: &Fed, res: FeedbackResult, sent: usize, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let meta = res.meta.clone().unwrap_or_default();
    for (engine, accepted) in meta.get("engines").and_then(Value::as_object).into_iter().flatten() {
        eprintln!("rcp: engine '{engine}' accepted {accepted}");
    }
    let unrouted: Vec<&str> =
        meta.get("unrouted").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if json {
        let mut v = serde_json::to_value(&res).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("sent".into(), json!(sent));
        }
        print_json(&v);
    } else {
        outln!("accepted {} of {sent} signals", res.accepted);
        if !unrouted.is_empty() {
            outln!("not routed ({}): {}", unrouted.len(), unrouted.join(", "));
        }
    }
    if unrouted.is_empty() {
        return Ok(());
    }
    let path = fed.path.display();
    let why = match fed.fed.registry().corpora {
        Corpora::Shared => format!(
            "the engines of {path} share ids, so the federation sends a signal only to the engines it saw \
             return that hit, and this rcpctl process has returned none: send feedback to the engine that \
             served the hit (--stdio or --http), or through the rcp-gateway that served it"
        ),
        Corpora::Distinct => format!(
            "{path} has \"corpora\": \"distinct\": a hit id is <engine>:<id>, naming a connected engine of \
             the registry that advertises feedback, and these ids do not"
        ),
    };
    eprintln!("rcp: {} signal(s) not routed: {why}", unrouted.len());
    if unrouted.len() == sent {
        return Err(format!("none of the {sent} signal(s) could be routed to an engine (see above)").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_naming_one_hit_make_one_signal() {
        let args = FeedbackArgs {
            target: Target { stdio: Some("x".into()), http: None, registry: None },
            session: None,
            query: None,
            used: vec!["a".into(), "b".into()],
            cited: vec!["a".into()],
            helpful: vec![],
            unhelpful: vec!["b".into()],
            reward: vec![("a".into(), 0.5)],
            poison: vec!["c".into()],
            injection: vec![],
        };
        let v = serde_json::to_value(args.signals()).unwrap();
        assert_eq!(
            v,
            json!([
                {"hitId": "a", "used": true, "cited": true, "reward": 0.5},
                {"hitId": "b", "used": true, "helpful": false},
                {"hitId": "c", "poisonSuspected": true},
            ])
        );
    }

    #[test]
    fn rewards_are_checked_before_sending() {
        assert_eq!(reward("doc=7=0.25").unwrap(), ("doc=7".to_owned(), 0.25));
        assert!(reward("doc-7=1.5").unwrap_err().contains("[-1, 1]"));
        assert!(reward("doc-7").unwrap_err().contains("HIT_ID=R"));
        assert!(reward("doc-7=x").unwrap_err().contains("not a number"));
    }
}
