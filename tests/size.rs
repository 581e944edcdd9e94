//! Pins the size of what every connection slot costs, the way mio pins its
//! own types' sizes: "kept small" is a claim tests can hold.
//!
//! A worker keeps one `Conn` per slot (tens of thousands at once) and one
//! in-flight entry per slot and pipeline depth. A change that grows either
//! must change this test too, and say why in its commit.

#[test]
fn conn_slot_size() {
    let (conn, _) = soakd::CONN_SIZES;
    println!("size_of::<Conn>() = {conn}");
    assert_eq!(conn, 144, "Conn changed size");
}

#[test]
fn inflight_entry_size() {
    let (_, entry) = soakd::CONN_SIZES;
    println!("size_of::<Inflight>() = {entry}");
    assert_eq!(entry, 24, "the in-flight entry changed size");
}
