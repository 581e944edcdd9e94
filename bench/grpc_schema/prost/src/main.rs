//! protox + prost-reflect: compile time, and the JSON mapping cases (see
//! ../run.sh).
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use std::time::Instant;

fn compile(include: &str, file: &str) -> DescriptorPool {
    protox::Compiler::new([include])
        .unwrap()
        .include_imports(true)
        .open_files([file])
        .unwrap_or_else(|e| panic!("{e:?}"))
        .descriptor_pool()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args[1].as_str() {
        "compile" => {
            let n: usize = args[2].parse().unwrap();
            let mut times = Vec::new();
            for _ in 0..n {
                let t = Instant::now();
                let pool = compile(&args[3], &args[4]);
                times.push(t.elapsed().as_secs_f64() * 1e6);
                assert!(pool.files().len() >= 2);
            }
            times.sort_by(f64::total_cmp);
            println!("{:.0}", times[n / 2]);
        }
        "error" => {
            let e = protox::Compiler::new([&args[2]]).unwrap().open_files([&args[3]]).err().unwrap();
            println!("{e}");
        }
        "cases" => {
            let pool = compile(&args[2], &args[3]);
            let desc = pool.get_message_by_name(&args[5]).unwrap();
            let cases: Vec<(String, serde_json::Value)> =
                serde_json::from_str(&std::fs::read_to_string(&args[4]).unwrap()).unwrap();
            for (_, value) in cases {
                let text = value.to_string();
                let mut de = serde_json::Deserializer::from_str(&text);
                match DynamicMessage::deserialize(desc.clone(), &mut de).and_then(|m| de.end().map(|_| m)) {
                    Err(e) => println!("err {}", e.to_string().replace('\n', " ")),
                    Ok(m) => {
                        let bytes = m.encode_to_vec();
                        let back = DynamicMessage::decode(desc.clone(), &bytes[..]).unwrap();
                        let mut out = Vec::new();
                        let mut ser = serde_json::Serializer::new(&mut out);
                        back.serialize_with_options(&mut ser, &SerializeOptions::new()).unwrap();
                        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                        println!("ok {hex} {}", String::from_utf8(out).unwrap());
                    }
                }
            }
        }
        m => panic!("mode {m}"),
    }
}
