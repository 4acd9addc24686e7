//! `accord-fuzz-seeds VECTORS_DIR OUT_DIR`: writes the fuzz targets' seed corpora under
//! `OUT_DIR/<target>/` (`fuzz/seeds.sh` runs it).
#![forbid(unsafe_code)]

use std::path::PathBuf;

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [vectors, out] = args.as_slice() else {
        eprintln!("usage: accord-fuzz-seeds VECTORS_DIR OUT_DIR");
        std::process::exit(2);
    };
    let n = accord_fuzz_targets::seeds::generate(vectors, out);
    eprintln!("wrote {n} seeds under {}", out.display());
}
