//! The requests of a run, made when a worker asks for the next one: a run of ten million
//! objects holds the objects in flight, not ten million URIs.

use http::Uri;
use qbench_core::spec::Target;
use qbench_core::wire::bytes_path;

use crate::plan::config::Config;
use crate::transport::ObjectReq;

type Make = dyn Fn(u64) -> ObjectReq + Send + Sync;

pub(crate) struct Requests {
    len: u64,
    make: Box<Make>,
    /// Bodies are checked by digest (no expected length): fetches of one URL must agree.
    pub hashed: bool,
}

impl Requests {
    pub(crate) fn new(
        len: u64,
        hashed: bool,
        make: impl Fn(u64) -> ObjectReq + Send + Sync + 'static,
    ) -> Self {
        Self {
            len,
            make: Box::new(make),
            hashed,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Request `i` of the run, in the order the workload lists them.
    pub(crate) fn get(&self, i: u64) -> Option<ObjectReq> {
        (i < self.len).then(|| (self.make)(i))
    }

    /// Shard `s`'s part: its `k`-th request is the whole's `s.item(k)`.
    pub(crate) fn shard(self, s: qbench_core::spec::shard::Shard) -> Self {
        let Self { len, make, hashed } = self;
        Self {
            len: s.share(len),
            make: Box::new(move |k| make(s.item(k))),
            hashed,
        }
    }

    /// The run's requests for `cfg`, against the origin actually connected to.
    pub(crate) fn of(cfg: &Config, authority: &str) -> Self {
        let verify = cfg.spec().verify;
        match (&cfg.run.target, &cfg.spec().objects) {
            (Target::Urls { urls, repeat, .. }, _) => {
                // Checked to parse when the configuration was validated.
                let uris: Vec<Uri> = urls.iter().filter_map(|u| u.parse().ok()).collect();
                let len = uris.len() as u64 * u64::from(*repeat);
                Self::new(len, verify, move |i| ObjectReq {
                    uri: uris[(i % uris.len() as u64) as usize].clone(),
                    expected_len: None,
                    verify,
                })
            }
            (_, Some(w)) => {
                // (index just past the group, object size, its URI), for a binary search by
                // index; a URI is made once per group (a clone shares its bytes).
                let mut end = 0u64;
                let groups: Vec<(u64, u64, Uri)> = w
                    .groups()
                    .iter()
                    .map(|g| {
                        end += g.count;
                        let uri = format!("https://{authority}{}", bytes_path(g.size.0))
                            .parse()
                            .expect("an authority and a /bytes path make a URI");
                        (end, g.size.0, uri)
                    })
                    .collect();
                Self::new(end, false, move |i| {
                    let (_, size, uri) = &groups[groups.partition_point(|(end, ..)| *end <= i)];
                    ObjectReq {
                        uri: uri.clone(),
                        expected_len: Some(*size),
                        verify,
                    }
                })
            }
            (_, None) => Self::new(0, false, |i| unreachable!("no request {i} in an empty run")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_map_to_groups_in_order() {
        let w: qbench_core::Workload = "2x5KB,1x1MB,3x1B".parse().unwrap();
        let spec = qbench_core::spec::RunSpec {
            objects: Some(w),
            ..Default::default()
        };
        let cfg = Config::new(spec, &Default::default(), Default::default()).unwrap();
        let r = Requests::of(&cfg, "h:1");
        assert_eq!(r.len(), 6);
        let sizes: Vec<u64> = (0..6)
            .map(|i| r.get(i).unwrap().expected_len.unwrap())
            .collect();
        assert_eq!(sizes, [5000, 5000, 1_000_000, 1, 1, 1]);
        assert_eq!(
            r.get(2).unwrap().uri.to_string(),
            "https://h:1/bytes/1000000"
        );
        assert!(r.get(6).is_none());
    }
}
