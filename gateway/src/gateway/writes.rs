//! Shard write routing: `index/add` and `index/delete` go to the shard that owns each id
//! (a stable hash of the id, [`crate::shard::owner`]), one call per shard, concurrently, in
//! the collection named by `_meta.collection` or the first indexable one.

use rcp_client::Client;
use rcp_server::access::{Grant, Scope};
use rcp_server::{HandlerResult, Index, RequestContext};
use rcp_wire::capabilities::IndexCapability;
use rcp_wire::index::{IndexAddParams, IndexAddResult, IndexDeleteParams, IndexDeleteResult};
use rcp_wire::request;
use rcp_wire::{Meta, RcpError};
use serde_json::{Value, json};

use super::startup::{Collection, Gateway, META_COLLECTION};
use crate::shard;

impl Gateway {
    /// The collection an `index/*` call writes to: `_meta.collection`, or the first indexable
    /// collection in registry order that `grant` may write to. A collection outside the grant
    /// is `-32012`, whether it exists or not.
    fn write_target(&self, meta: Option<&Meta>, grant: &Grant) -> HandlerResult<&Collection> {
        let field = format!("_meta.{META_COLLECTION}");
        let name = match meta.and_then(|m| m.get(META_COLLECTION)) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(RcpError::invalid_params(field, format!("must be a collection name, got {other}")));
            }
            None => match self.indexable.iter().find(|c| grant.reaches(Scope::Write, c)) {
                Some(c) => c.clone(),
                None if grant.collections(Scope::Write).is_some() => return Err(may_not_write(None)),
                None => return Err(RcpError::capability_missing("index/add", "index")),
            },
        };
        if !grant.reaches(Scope::Write, &name) {
            return Err(may_not_write(Some(&name)));
        }
        if !self.indexable.contains(&name) {
            let writable: Vec<&str> =
                self.indexable.iter().filter(|c| grant.reaches(Scope::Write, c)).map(String::as_str).collect();
            return Err(RcpError::invalid_params(
                field,
                format!("collection '{name}' is not indexable on every shard; indexable: {}", writable.join(", ")),
            ));
        }
        self.collections.iter().find(|c| c.name == name).ok_or_else(|| {
            RcpError::invalid_params(format!("_meta.{META_COLLECTION}"), format!("unknown collection '{name}'"))
        })
    }

    async fn shard_client(&self, index: usize) -> HandlerResult<Client> {
        self.pool.client(index).await.map_err(|e| {
            let id = &self.pool.entries()[index].spec.id;
            RcpError::backend_unavailable(format!("shard '{id}' unavailable: {e}"))
        })
    }
}

impl Index for Gateway {
    fn capability(&self) -> IndexCapability {
        IndexCapability { writable: self.writable, ..Default::default() }
    }

    /// Routes each document to the shard owning its id (a gateway-minted id when it has
    /// none), one `index/add` per shard, concurrently; ids come back in request order.
    async fn add(&self, mut params: IndexAddParams, ctx: RequestContext) -> HandlerResult<IndexAddResult> {
        let target = self.write_target(params.meta.as_ref(), ctx.grant())?;
        let n = target.shards.len();
        let owner = self.collections.iter().position(|c| c.name == target.name).unwrap_or_default();
        // The documents move to their shards; the per-shard params copy everything else. With
        // namespaced ids, a document may name its id in the collection's namespace.
        let mut documents = std::mem::take(&mut params.documents);
        if self.namespaces.enabled() {
            for (i, doc) in documents.iter_mut().enumerate() {
                let Some(id) = doc.id.as_mut() else { continue };
                match self.namespaces.split(id) {
                    Some((o, local)) if o == owner => *id = local.to_owned(),
                    Some(_) => {
                        return Err(RcpError::invalid_params(
                            format!("documents[{i}].id"),
                            format!("'{id}' names another collection than '{}', the one written to", target.name),
                        ));
                    }
                    None => {}
                }
            }
        }
        let mut per_shard: Vec<(Vec<usize>, IndexAddParams)> =
            (0..n).map(|_| (Vec::new(), IndexAddParams { documents: Vec::new(), ..params.clone() })).collect();
        let key = params.meta.as_ref().and_then(|m| m.get("idempotencyKey")).and_then(Value::as_str).map(str::to_owned);
        for (pos, mut doc) in documents.into_iter().enumerate() {
            let id = doc.id.get_or_insert_with(|| format!("gw-{}", uuid::Uuid::new_v4())).clone();
            let s = shard::owner(&id, n);
            per_shard[s].0.push(pos);
            per_shard[s].1.documents.push(doc);
        }
        let total: usize = per_shard.iter().map(|(p, _)| p.len()).sum();
        let calls =
            per_shard.into_iter().enumerate().filter(|(_, (p, _))| !p.is_empty()).map(|(s, (positions, mut p))| {
                let index = target.shards[s];
                let mut meta = Meta::new();
                if let Some(k) = &key {
                    meta.insert("idempotencyKey".into(), json!(format!("{k}/{}", self.pool.entries()[index].spec.id)));
                }
                p.meta = Some(meta);
                async move {
                    let client = self.shard_client(index).await?;
                    let id = &self.pool.entries()[index].spec.id;
                    let r = client.index_add(p).await.map_err(|e| {
                        let mut err = e.to_rcp();
                        err.message = format!("shard '{id}': {}", err.message);
                        err
                    })?;
                    Ok::<_, RcpError>((positions, r))
                }
            });
        let results = futures::future::join_all(calls).await;
        let mut ids = vec![String::new(); total];
        let mut chunks = None::<u64>;
        for r in results {
            let (positions, r) = r?;
            if r.ids.len() != positions.len() {
                return Err(RcpError::internal(format!(
                    "a shard returned {} ids for {} documents",
                    r.ids.len(),
                    positions.len()
                )));
            }
            for (pos, id) in positions.into_iter().zip(r.ids) {
                ids[pos] = id;
            }
            if let Some(c) = r.chunks {
                chunks = Some(chunks.unwrap_or(0) + c);
            }
        }
        if self.namespaces.enabled() {
            ids = ids.into_iter().map(|id| self.namespaces.qualify(owner, &id)).collect();
        }
        Ok(IndexAddResult { ids, chunks, meta: None })
    }

    /// Deletes each id on the shard that owns it: in the collection `_meta.collection` names
    /// (or the first indexable one), or, with namespaced ids, in the collection its namespace
    /// names.
    async fn delete(&self, params: IndexDeleteParams, ctx: RequestContext) -> HandlerResult<IndexDeleteResult> {
        let grant = ctx.grant();
        let mut per_engine: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
        if self.namespaces.enabled() {
            for (i, id) in params.ids.iter().enumerate() {
                let bad = |why: String| RcpError::invalid_params(format!("ids[{i}]"), why);
                let Some((owner, local)) = self.namespaces.split(id) else {
                    if grant.collections(Scope::Write).is_some() {
                        return Err(may_not_write(None));
                    }
                    return Err(bad(format!(
                        "'{id}' is not '<collection>:<id>' with a collection among: {}",
                        self.collections().join(", ")
                    )));
                };
                let c = &self.collections[owner];
                if !grant.reaches(Scope::Write, &c.name) {
                    return Err(may_not_write(Some(&c.name)));
                }
                if !self.indexable.contains(&c.name) {
                    return Err(bad(format!("collection '{}' is not indexable on every shard", c.name)));
                }
                per_engine.entry(c.shards[shard::owner(local, c.shards.len())]).or_default().push(local.to_owned());
            }
        } else {
            let target = self.write_target(params.meta.as_ref(), grant)?;
            let n = target.shards.len();
            for id in params.ids {
                per_engine.entry(target.shards[shard::owner(&id, n)]).or_default().push(id);
            }
        }
        let calls = per_engine.into_iter().map(|(index, ids)| async move {
            let client = self.shard_client(index).await?;
            client.request::<request::IndexDelete>(&IndexDeleteParams { ids, meta: None }).await.map_err(|e| e.to_rcp())
        });
        let mut deleted = 0;
        for r in futures::future::join_all(calls).await {
            deleted += r?.deleted;
        }
        Ok(IndexDeleteResult { deleted, meta: None })
    }
}

/// `-32012` for a write outside the caller's grant: `collection` is the name the caller gave
/// (whether it exists is not said), `None` when it named none and the grant reaches no
/// collection the call could write to.
fn may_not_write(collection: Option<&str>) -> RcpError {
    RcpError::unauthorized().with_detail(match collection {
        Some(c) => format!("these credentials may not write to collection '{c}'"),
        None => "these credentials reach no collection this call could write to".to_owned(),
    })
}
