//! What every candidate binary has anyway: reading JSON (soakd has
//! serde_json already), so the size difference is the schema crates'.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    println!("{}", v);
}
