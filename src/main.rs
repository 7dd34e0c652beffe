use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    match Cli::parse() {}
}
