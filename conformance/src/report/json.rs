//! The report for machines (`--json`). Its shape is stable and documented in the crate's
//! README; `schemaVersion` changes when a field changes meaning or disappears (new fields may be
//! added without it).

use serde_json::{Value, json};

use super::{CheckResult, Level, Report, Status, sweep_path};

/// The version of the JSON report's shape.
pub const JSON_SCHEMA_VERSION: u64 = 2;

impl Report {
    /// The machine-readable report (`--json`).
    pub fn to_json(&self) -> Value {
        let n = self.counts();
        json!({
            "schemaVersion": JSON_SCHEMA_VERSION,
            "tool": "rcp-conformance",
            "version": env!("CARGO_PKG_VERSION"),
            "transport": self.transport,
            "levelLimit": self.level_limit.as_str(),
            "server": self.server,
            "certifiedLevel": self.certified().map_or("NONE", Level::as_str),
            "declaredLevel": self.declared,
            "declarationHonest": self.declaration_honest(),
            "success": self.success(),
            "exitCode": self.exit_code(),
            "counts": {
                "passed": n.passed, "failed": n.failed, "skipped": n.skipped,
                "warnings": n.warnings, "infos": n.infos, "see": n.see,
            },
            "checks": self.checks.iter().map(check_json).collect::<Vec<_>>(),
            "rootCauses": self.root_causes().into_iter().map(|(c, followers)| json!({
                "check": c.id,
                "status": c.status.as_str(),
                "detail": c.detail,
                "alsoChecks": followers.iter().map(|f| f.id).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "sweep": self.sweep_json(),
        })
    }

    /// The malformed-params sweep by method: `{method: {status, detail, failed: [{check, path,
    /// status, detail}]}}`; `status` is FAIL when a path failed, else the summary's.
    fn sweep_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (method, checks) in self.sweep_findings() {
            let summary = checks.iter().find(|c| sweep_path(c.id).is_none());
            let failed: Vec<Value> = checks
                .iter()
                .filter_map(|c| sweep_path(c.id).map(|p| (c, p)))
                .map(|(c, path)| json!({"check": c.id, "path": path, "status": c.status.as_str(), "detail": c.detail}))
                .collect();
            // The method's verdict: FAIL when one of its paths failed, else its summary's.
            let status = if checks.iter().any(|c| c.status == Status::Fail) {
                Some(Status::Fail.as_str())
            } else {
                summary.map(|c| c.status.as_str())
            };
            out.insert(
                method.to_owned(),
                json!({
                    "status": status,
                    "detail": summary.map(|c| c.detail.as_str()),
                    "failed": failed,
                }),
            );
        }
        Value::Object(out)
    }
}

fn check_json(c: &CheckResult) -> Value {
    json!({
        "id": c.id,
        "level": c.level.as_str(),
        "name": c.name,
        "section": c.section,
        "strength": c.strength.as_str(),
        "keyword": c.basis.keyword.as_str(),
        "quote": c.basis.quote,
        "status": c.status.as_str(),
        "detail": c.detail,
        "see": c.see,
    })
}
