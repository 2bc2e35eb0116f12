//! The requests of a run, made when a worker asks for the next one: a run of ten million
//! objects holds the objects in flight, not ten million URIs.

use http::Uri;
use qbench_core::spec::Target;
use qbench_core::wire::bytes_path;

use crate::plan::config::Config;
use crate::transport::ObjectReq;

/// Request `i` as the client thread `lane` makes it.
type Make = dyn Fn(u64, usize) -> ObjectReq + Send + Sync;

pub(crate) struct Requests {
    len: u64,
    make: Box<Make>,
    /// Client threads with URIs of their own: a URI's clone counts references in its bytes,
    /// and one URI shared by every thread had each request move that count's cache line
    /// between cores several times.
    lanes: usize,
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
            make: Box::new(move |i, _| make(i)),
            lanes: 1,
            hashed,
        }
    }

    /// As [`Requests::new`], with `make` told which of `lanes` client threads asks.
    pub(crate) fn on_lanes(
        len: u64,
        hashed: bool,
        lanes: usize,
        make: impl Fn(u64, usize) -> ObjectReq + Send + Sync + 'static,
    ) -> Self {
        Self {
            len,
            make: Box::new(make),
            lanes: lanes.max(1),
            hashed,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Request `i` of the run, in the order the workload lists them.
    pub(crate) fn get(&self, i: u64) -> Option<ObjectReq> {
        let lane = crate::transport::pinned::current_index().unwrap_or(0) % self.lanes;
        (i < self.len).then(|| (self.make)(i, lane))
    }

    /// Shard `s`'s part: its `k`-th request is the whole's `s.item(k)`.
    pub(crate) fn shard(self, s: qbench_core::spec::shard::Shard) -> Self {
        let Self {
            len,
            make,
            lanes,
            hashed,
        } = self;
        Self {
            len: s.share(len),
            make: Box::new(move |k, lane| make(s.item(k), lane)),
            lanes,
            hashed,
        }
    }

    /// The run's requests for `cfg`, against the origin actually connected to.
    pub(crate) fn of(cfg: &Config, authority: &str) -> Self {
        let verify = cfg.spec().verify;
        let lanes = cfg.spec().client_threads.max(1) as usize;
        match (&cfg.run.target, &cfg.spec().objects) {
            (Target::Urls { urls, repeat, .. }, _) => {
                // Checked to parse when the configuration was validated.
                let uris = per_lane(lanes, || urls.iter().filter_map(|u| u.parse().ok()));
                let n = uris[0].len() as u64;
                let len = n * u64::from(*repeat);
                Self::on_lanes(len, verify, lanes, move |i, lane| ObjectReq {
                    uri: uris[lane][(i % n) as usize].clone(),
                    expected_len: None,
                    verify,
                })
            }
            (_, Some(w)) => {
                // (index just past the group, object size), for a binary search by index,
                // and each lane's URI of each group.
                let mut end = 0u64;
                let groups: Vec<(u64, u64)> = w
                    .groups()
                    .iter()
                    .map(|g| {
                        end += g.count;
                        (end, g.size.0)
                    })
                    .collect();
                let uris = per_lane(lanes, || {
                    w.groups().iter().map(|g| {
                        format!("https://{authority}{}", bytes_path(g.size.0))
                            .parse::<Uri>()
                            .expect("an authority and a /bytes path make a URI")
                    })
                });
                Self::on_lanes(end, false, lanes, move |i, lane| {
                    let g = groups.partition_point(|(end, _)| *end <= i);
                    ObjectReq {
                        uri: uris[lane][g].clone(),
                        expected_len: Some(groups[g].1),
                        verify,
                    }
                })
            }
            (_, None) => Self::new(0, false, |i| unreachable!("no request {i} in an empty run")),
        }
    }
}

/// `lanes` copies of the URIs `make` parses, each with bytes of its own.
fn per_lane<I: Iterator<Item = Uri>>(lanes: usize, make: impl Fn() -> I) -> Vec<Vec<Uri>> {
    (0..lanes).map(|_| make().collect()).collect()
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

    #[test]
    fn each_client_thread_has_the_same_uris_in_bytes_of_its_own() {
        let spec = qbench_core::spec::RunSpec {
            objects: Some("2x5KB,1x1MB".parse().unwrap()),
            client_threads: 3,
            ..Default::default()
        };
        let cfg = Config::new(spec, &Default::default(), Default::default()).unwrap();
        let r = Requests::of(&cfg, "h:1");
        for i in 0..3 {
            let (a, b) = ((r.make)(i, 0), (r.make)(i, 2));
            assert_eq!(a.uri, b.uri);
            assert_eq!(a.expected_len, b.expected_len);
            let (pa, pb) = (a.uri.path().as_ptr(), b.uri.path().as_ptr());
            assert_ne!(pa, pb, "lanes 0 and 2 share the bytes of {}", a.uri);
        }
        // Off the pinned runtimes, requests come from lane 0.
        assert_eq!(
            r.get(1).unwrap().uri.path().as_ptr(),
            (r.make)(1, 0).uri.path().as_ptr()
        );
    }
}
