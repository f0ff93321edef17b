//! The suite's roster of methods equals the methods `rcp_wire` declares: a method added to the
//! protocol crate without its conformance entry (or the reverse) fails here. The suite keeps
//! its own list on purpose (it certifies servers it does not depend on); this test is what
//! keeps the two equal.

use rcp_wire::methods::Method;
use rcp_wire::request::DECLARED;

#[test]
fn the_suite_knows_every_declared_method_and_no_other() {
    let mut declared: Vec<&str> = DECLARED.iter().map(|m| m.name()).collect();
    declared.sort_unstable();
    let mut all: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
    all.sort_unstable();
    assert_eq!(declared, all, "rcp_wire::request declares every Method");
    let mut suite = rcp_conformance::SPEC_METHODS.to_vec();
    suite.sort_unstable();
    assert_eq!(suite, declared, "rcp_conformance::SPEC_METHODS lists exactly the declared methods");
}
