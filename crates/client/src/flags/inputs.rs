//! The files a benchmark's flags name for reading, held against the files it writes: an
//! output that is an input would replace what the run reads.

use std::path::PathBuf;

use qbench_core::spec::link::RateSpec;
use qbench_engine::error::ConfigError;

use super::cli::RunArgs;

impl RunArgs {
    /// The files a benchmark reads, each with the flag that names it once.
    pub fn inputs(&self) -> Vec<(&'static str, PathBuf)> {
        let mut all = Vec::new();
        if let Some(ca) = &self.ca {
            all.push(("--ca", ca.clone()));
        }
        if let Some(page) = &self.apps.page {
            all.push(("--page", PathBuf::from(&page.name)));
        }
        let links = [
            ("--link", &self.build.link),
            ("--link-b", &self.build.chain.link_b),
        ];
        for (flag, link) in links {
            for (_, d) in link.iter().flat_map(|l| l.directions()) {
                if let Some(RateSpec::Trace { path } | RateSpec::Mahimahi { path }) = &d.rate {
                    let input = (flag, PathBuf::from(path));
                    if !all.contains(&input) {
                        all.push(input);
                    }
                }
            }
        }
        all
    }

    /// Every output can be written, has a file of its own and is none of the inputs.
    pub fn check_outputs(&self) -> Result<(), ConfigError> {
        let outputs = self.outputs();
        outputs.check_writable()?;
        let inputs = self.inputs();
        let inputs: Vec<_> = inputs.iter().map(|(f, p)| (*f, p.as_path())).collect();
        outputs.check_not_inputs(&inputs)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::flags::cli::Cli;

    /// Every file a benchmark reads is listed with its flag, both links' traces too.
    #[test]
    fn inputs_name_every_file_read() {
        let cli = Cli::try_parse_from([
            "qbench",
            "--ca",
            "c.pem",
            "--link",
            "up.rate=trace:up.trace,down.rate=mahimahi:down.trace",
            "--link-b",
            "rate=trace:b.trace",
        ])
        .unwrap();
        let inputs: Vec<(&str, String)> = cli
            .run
            .inputs()
            .into_iter()
            .map(|(f, p)| (f, p.display().to_string()))
            .collect();
        let want = [
            ("--ca", "c.pem"),
            ("--link", "up.trace"),
            ("--link", "down.trace"),
            ("--link-b", "b.trace"),
        ];
        for (flag, path) in want {
            assert!(
                inputs.iter().any(|(f, p)| *f == flag && p == path),
                "{flag} {path} not in {inputs:?}"
            );
        }
        assert_eq!(inputs.len(), want.len(), "{inputs:?}");
    }
}
