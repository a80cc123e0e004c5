//! Finds libndpi with pkg-config (Debian 12: `apt-get install libndpi-dev`)
//! and compiles `src/shim.c`, the few C functions the Rust side calls (the
//! shim reads fields of nDPI's flow struct, whose layout Rust does not
//! repeat). Fails with a message naming the package when libndpi is absent.

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    let lib = match pkg_config::Config::new()
        .atleast_version("4.2")
        .probe("libndpi")
    {
        Ok(lib) => lib,
        Err(e) => panic!(
            "earlybird-ndpi-sys: libndpi (nDPI >= 4.2) not found by pkg-config: {e}\n\
             install it (Debian/Ubuntu: apt-get install libndpi-dev) or build without the `ndpi` feature"
        ),
    };
    let mut build = cc::Build::new();
    build.file("src/shim.c").warnings(true);
    for dir in &lib.include_paths {
        build.include(dir);
    }
    build.compile("earlybird_ndpi_shim");
    // The shim's archive comes before libndpi on the link line.
    for l in &lib.libs {
        println!("cargo:rustc-link-lib={l}");
    }
}
