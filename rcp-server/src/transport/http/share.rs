//! Per-client shares of the connection cap (§15.5): one client (IP address) may hold at most
//! `max_connections_per_client` of the server's connections, so a client that opens
//! connections and leaves them idle (half-open, or slowly sending headers) cannot take every
//! place under the global cap and starve the others. Its connections over the share are
//! refused at once, like connections over the cap.
//!
//! A client is its IP address; IPv6 clients are grouped by their /64 prefix (one host usually
//! owns a whole /64 and can pick any address in it), and IPv4-mapped IPv6 addresses count as
//! their IPv4 address. Behind a reverse proxy every client has the proxy's address: raise the
//! share to the cap there.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// The client an address belongs to, for every per-client budget of the HTTP transport.
pub(super) fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// The open connections of each client, against a per-client share.
#[derive(Debug)]
pub(super) struct ConnectionShares {
    per_client: usize,
    /// Only clients with at least one open connection have an entry, so the table holds at
    /// most as many entries as there are open connections.
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its client's share, given back when the connection ends.
#[derive(Debug)]
pub(super) struct SharePlace {
    shares: Arc<ConnectionShares>,
    client: IpAddr,
}

impl Drop for SharePlace {
    fn drop(&mut self) {
        let Ok(mut open) = self.shares.open.lock() else { return };
        if let Some(n) = open.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.client);
            }
        }
    }
}

impl ConnectionShares {
    /// Shares of `per_client` connections each (at least 1).
    pub(super) fn new(per_client: usize) -> Self {
        Self { per_client: per_client.max(1), open: Mutex::new(HashMap::new()) }
    }

    /// A place for one more connection from `peer`, or `None` when its client already holds
    /// its whole share.
    pub(super) fn take(self: &Arc<Self>, peer: IpAddr) -> Option<SharePlace> {
        let client = client_of(peer);
        let mut open = self.open.lock().ok()?;
        let n = open.entry(client).or_insert(0);
        if *n >= self.per_client {
            return None;
        }
        *n += 1;
        Some(SharePlace { shares: Arc::clone(self), client })
    }

    /// How many connections `peer`'s client holds now.
    #[cfg(test)]
    fn held(&self, peer: IpAddr) -> usize {
        self.open.lock().map_or(0, |open| open.get(&client_of(peer)).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn each_client_holds_at_most_its_share_and_gets_it_back_on_drop() {
        let shares = Arc::new(ConnectionShares::new(2));
        let a1 = shares.take(A).expect("first");
        let a2 = shares.take(A).expect("second");
        assert!(shares.take(A).is_none(), "over A's share");
        assert!(shares.take(B).is_some(), "B has a share of its own");
        drop(a1);
        let a3 = shares.take(A).expect("a place was given back");
        drop((a2, a3));
        assert_eq!(shares.held(A), 0);
        assert!(shares.open.lock().expect("lock").is_empty(), "no entry stays for a client without connections");
    }

    #[test]
    fn ipv6_clients_are_grouped_by_their_64_prefix_and_mapped_v4_is_v4() {
        let x: IpAddr = "2001:db8:1:2::1".parse().expect("v6");
        let y: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("v6");
        let z: IpAddr = "2001:db8:1:3::1".parse().expect("v6");
        assert_eq!(client_of(x), client_of(y));
        assert_ne!(client_of(x), client_of(z));
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().expect("mapped");
        assert_eq!(client_of(mapped), B);
        let shares = Arc::new(ConnectionShares::new(1));
        let _x = shares.take(x).expect("first of the /64");
        assert!(shares.take(y).is_none(), "the same /64 is the same client");
        assert!(shares.take(z).is_some());
    }
}
