//! The graph's file format: `RCPGRAPH`, a version, the nodes with their ids, tags and edges,
//! and a CRC-32 of everything before it. Decoding checks every length against the bytes
//! present and the graph's invariants (symmetric edges, known nodes, finite positive
//! weights, the degree cap), so damage is refused, never half-read.

use crate::doc_graph::{DocGraph, Edge};

/// The first bytes of a graph file.
pub const MAGIC: &[u8; 8] = b"RCPGRAPH";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// Why a graph file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not a graph file.
    #[error("not a graph file (bad magic)")]
    Magic,
    /// Written by another version of the format.
    #[error("graph file version {0}, expected {VERSION}")]
    Version(u32),
    /// The checksum does not match the contents.
    #[error("graph file checksum mismatch")]
    Checksum,
    /// Shorter than its contents say.
    #[error("graph file truncated")]
    Truncated,
    /// Well-formed bytes describing an impossible graph.
    #[error("graph file inconsistent: {0}")]
    Inconsistent(String),
}

/// Encodes the graph with a caller's `stamp` (for example the index version it describes).
pub fn encode(graph: &DocGraph, stamp: u64) -> Vec<u8> {
    let crate::doc_graph::Parts { max_degree, ids, tags, adj } = graph.parts();
    let mut out = Vec::with_capacity(32 + ids.len() * 16 + graph.edge_count() * 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(&(max_degree as u32).to_le_bytes());
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for ((id, tag), edges) in ids.iter().zip(tags).zip(adj) {
        match id {
            None => out.push(0),
            Some(id) => {
                out.push(1);
                out.extend_from_slice(&(id.len() as u32).to_le_bytes());
                out.extend_from_slice(id.as_bytes());
                out.extend_from_slice(&tag.to_le_bytes());
                out.extend_from_slice(&(edges.len() as u32).to_le_bytes());
                for e in edges {
                    out.extend_from_slice(&e.to.to_le_bytes());
                    out.extend_from_slice(&e.weight.to_le_bytes());
                }
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a graph file: the graph and its stamp.
pub fn decode(bytes: &[u8]) -> Result<(DocGraph, u64), DecodeError> {
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(DecodeError::Magic);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().map_err(|_| DecodeError::Truncated)?);
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    let (body, crc) = bytes.split_at(bytes.len().checked_sub(4).ok_or(DecodeError::Truncated)?);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().map_err(|_| DecodeError::Truncated)?) {
        return Err(DecodeError::Checksum);
    }
    let mut r = Reader { bytes: body, at: 12 };
    let stamp = r.u64()?;
    let max_degree = r.u32()? as usize;
    let n = r.u32()? as usize;
    // Each node takes at least one byte: a count beyond the bytes left is damage.
    if n > r.left() {
        return Err(DecodeError::Truncated);
    }
    let (mut ids, mut tags, mut adj) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        match r.take(1)?[0] {
            0 => {
                ids.push(None);
                tags.push(0);
                adj.push(Vec::new());
            }
            1 => {
                let len = r.u32()? as usize;
                let id = std::str::from_utf8(r.take(len)?)
                    .map_err(|_| DecodeError::Inconsistent("a node id is not UTF-8".into()))?;
                ids.push(Some(id.to_owned()));
                tags.push(r.u32()?);
                let degree = r.u32()? as usize;
                if degree > max_degree || degree.saturating_mul(8) > r.left() {
                    return Err(DecodeError::Inconsistent(format!("a node with {degree} edges")));
                }
                let mut edges = Vec::with_capacity(degree);
                for _ in 0..degree {
                    edges.push(Edge { to: r.u32()?, weight: f32::from_bits(r.u32()?) });
                }
                adj.push(edges);
            }
            b => return Err(DecodeError::Inconsistent(format!("node marker {b}"))),
        }
    }
    if r.left() != 0 {
        return Err(DecodeError::Inconsistent(format!("{} bytes after the last node", r.left())));
    }
    let graph = DocGraph::from_parts(max_degree, ids, tags, adj).map_err(DecodeError::Inconsistent)?;
    Ok((graph, stamp))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(DecodeError::Truncated)?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| DecodeError::Truncated)?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| DecodeError::Truncated)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DocGraph {
        let mut g = DocGraph::new(3);
        g.upsert("a", 11, &[]);
        g.upsert("b", 12, &[("a", 0.5)]);
        g.upsert("c", 13, &[("a", 0.25), ("b", 0.75)]);
        g.upsert("d", 14, &[("c", 0.1)]);
        g.remove("b");
        g
    }

    #[test]
    fn round_trips() {
        let g = sample();
        let (back, stamp) = decode(&encode(&g, 42)).unwrap();
        assert_eq!(stamp, 42);
        assert_eq!(back, g);
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_refused() {
        let bytes = encode(&sample(), 7);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad).is_err(), "flip at {i}");
            assert!(decode(&bytes[..i]).is_err(), "truncated at {i}");
        }
    }

    #[test]
    fn other_versions_are_named() {
        let mut bytes = encode(&sample(), 7);
        bytes[8] = 9;
        assert_eq!(decode(&bytes).unwrap_err(), DecodeError::Version(9));
    }
}
