//! The `heterarchy` command.

fn main() {
    println!("heterarchy");
}
