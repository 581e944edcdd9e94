//! rust-protobuf's pure parser + dynamic messages + its JSON mapping:
//! compile time, and the JSON mapping cases (see ../run.sh).
use protobuf::reflect::FileDescriptor;
use std::time::Instant;

fn compile(include: &str, file: &str) -> Vec<FileDescriptor> {
    let parsed = protobuf_parse::Parser::new()
        .pure()
        .include(include)
        .input(format!("{include}/{file}"))
        .parse_and_typecheck()
        .unwrap_or_else(|e| panic!("{e:?}"));
    // The well-known types as rust-protobuf generated them (its JSON
    // mapping recognises those), the rest dynamic.
    use protobuf::well_known_types as wkt;
    let deps = [
        wkt::any::file_descriptor().clone(),
        wkt::duration::file_descriptor().clone(),
        wkt::empty::file_descriptor().clone(),
        wkt::field_mask::file_descriptor().clone(),
        wkt::struct_::file_descriptor().clone(),
        wkt::timestamp::file_descriptor().clone(),
        wkt::wrappers::file_descriptor().clone(),
    ];
    let own = parsed
        .file_descriptors
        .into_iter()
        .filter(|f| !f.name().starts_with("google/protobuf/"))
        .collect();
    let mut files = FileDescriptor::new_dynamic_fds(own, &deps).unwrap();
    files.extend(deps);
    files
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args[1].as_str() {
        "compile" => {
            let n: usize = args[2].parse().unwrap();
            let mut times = Vec::new();
            for _ in 0..n {
                let t = Instant::now();
                let files = compile(&args[3], &args[4]);
                times.push(t.elapsed().as_secs_f64() * 1e6);
                assert!(files.len() >= 2);
            }
            times.sort_by(f64::total_cmp);
            println!("{:.0}", times[n / 2]);
        }
        "error" => {
            let e = protobuf_parse::Parser::new()
                .pure()
                .include(&args[2])
                .input(format!("{}/{}", args[2], args[3]))
                .parse_and_typecheck()
                .err()
                .unwrap();
            println!("{e:#}");
        }
        "cases" => {
            let files = compile(&args[2], &args[3]);
            let name = &args[5];
            let desc = files.iter().find_map(|f| f.message_by_full_name(&format!(".{name}"))).unwrap();
            let cases: Vec<(String, serde_json::Value)> =
                serde_json::from_str(&std::fs::read_to_string(&args[4]).unwrap()).unwrap();
            for (_, value) in cases {
                match protobuf_json_mapping::parse_dyn_from_str(&desc, &value.to_string()) {
                    Err(e) => println!("err {}", e.to_string().replace('\n', " ")),
                    Ok(m) => {
                        let bytes = m.write_to_bytes_dyn().unwrap();
                        let back = desc.parse_from_bytes(&bytes).unwrap();
                        let json = protobuf_json_mapping::print_to_string(&*back)
                            .map_err(|e| e.to_string())
                            .unwrap_or_else(|e| format!("<print failed: {e}>"));
                        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                        println!("ok {hex} {json}");
                    }
                }
            }
        }
        m => panic!("mode {m}"),
    }
}
