//! The suite's roster of methods equals the methods `rcp_wire` declares: a method added to the
//! protocol crate without its conformance entry (or the reverse) fails here. The suite keeps
//! its own roster on purpose (it certifies servers written with other SDKs); this test is what
//! keeps the two equal, and each gated method's probe a valid request of its schema.

use rcp_wire::methods::Method;

#[test]
fn the_suite_knows_every_declared_method_and_no_other() {
    let mut declared: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
    declared.sort_unstable();
    let mut suite: Vec<&str> = rcp_conformance::spec_method_names().collect();
    suite.sort_unstable();
    assert_eq!(suite, declared, "rcp_conformance::SPEC_METHODS lists exactly the methods rcp_wire declares");
    for m in rcp_conformance::SPEC_METHODS {
        let declared = Method::from_name(m.name).and_then(|d| d.capability()).map(|c| c.key());
        assert_eq!(m.capability, declared, "{}: the suite gates it on the capability rcp_wire declares", m.name);
    }
}
