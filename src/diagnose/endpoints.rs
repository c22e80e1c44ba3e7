//! A mix's bottleneck named with the endpoints whose requests waited in it: the slowest
//! endpoints that took most of the requests' time, each far slower than the rest.

use super::{fact, FindingId};
use crate::run::{Finding, Kind, Run};

/// The endpoints of a mix named as the bottleneck's take together at least this share
/// of the requests' total time, and each of their requests at least this many times
/// the other endpoints' mean.
const ENDPOINT_SHARE: f64 = 0.5;
const ENDPOINT_SLOWER: f64 = 3.0;

/// The endpoints whose requests waited, slowest first, with their share of the
/// requests' time and the other endpoints' mean latency (µs): of the splits of the
/// endpoints by mean latency where the slow ones took [`ENDPOINT_SHARE`] of the time
/// and the least slow of them is [`ENDPOINT_SLOWER`] times the rest's mean, the one
/// with the widest such gap. `None` when no split qualifies (the endpoints alike, or a
/// single one).
fn slow_endpoints(
    eps: &[crate::run::EndpointResult],
) -> Option<(Vec<&crate::run::EndpointResult>, f64, f64)> {
    let mut by_mean: Vec<_> = eps.iter().filter(|e| e.latency.count > 0).collect();
    by_mean.sort_by(|a, b| b.latency.mean_us.total_cmp(&a.latency.mean_us));
    let total: f64 = by_mean.iter().map(|e| e.total_us()).sum();
    if total <= 0.0 {
        return None;
    }
    // Each split of the endpoints by mean latency that qualifies, with how far its
    // least slow endpoint stands above the rest's mean: the widest gap is the split.
    (1..by_mean.len())
        .filter_map(|k| {
            let (slow, rest) = by_mean.split_at(k);
            let rest_n: u64 = rest.iter().map(|e| e.latency.count).sum();
            let rest_mean = rest.iter().map(|e| e.total_us()).sum::<f64>() / rest_n.max(1) as f64;
            let share = slow.iter().map(|e| e.total_us()).sum::<f64>() / total;
            let gap = slow[k - 1].latency.mean_us / rest_mean.max(1e-9);
            (share >= ENDPOINT_SHARE && gap >= ENDPOINT_SLOWER)
                .then(|| (gap, (slow.to_vec(), share, rest_mean)))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, split)| split)
}

/// A mix's bottleneck names the endpoint(s) whose requests wait in it: the slowest
/// endpoints that took most of the requests' time, each of their requests far slower
/// than the rest's ([`slow_endpoints`]).
pub(super) fn name_the_endpoint(found: &mut [Finding], run: &Run) {
    let Some((slow, share, rest_mean)) = slow_endpoints(&run.results.endpoints) else {
        return;
    };
    let Some(f) = found
        .iter_mut()
        .find(|f| f.kind == Kind::Bottleneck && f.id != FindingId::ClientSaturated)
    else {
        return;
    };
    let names: Vec<String> = slow.iter().map(|e| format!("`{}`", e.name)).collect();
    let names = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!("{} and {last}", init.join(", ")),
        None => return,
    };
    f.title.push_str(&format!(
        " — the requests of {names} ({:.1}% of the requests' time)",
        100.0 * share
    ));
    f.evidence.push(fact(
        "slow endpoints: share of the requests' time",
        (1000.0 * share).round() / 10.0,
        "%",
    ));
    for e in &slow {
        f.evidence.push(fact(
            &format!("{}: mean latency", e.name),
            e.latency.mean_us / 1e3,
            "ms",
        ));
    }
    f.evidence
        .push(fact("other endpoints: mean latency", rest_mean / 1e3, "ms"));
    let each: Vec<String> = slow
        .iter()
        .map(|e| format!("{:.1} ms", e.latency.mean_us / 1e3))
        .collect();
    let whose = if slow.len() == 1 { "its" } else { "their" };
    f.explanation.push_str(&format!(
        " Of the mix's endpoints, {names} waited here: {whose} requests took {} each against {:.1} ms for the others', {:.1}% of all the requests' time.",
        each.join(", "),
        rest_mean / 1e3,
        100.0 * share
    ));
}

#[cfg(test)]
mod tests {
    use super::slow_endpoints;

    /// The endpoints named at the ends of the rule's range: an endpoint 3× the others'
    /// mean with half the time is named, just under either bound it is not; two slow
    /// endpoints are named together; one endpoint far slower than a second slow one
    /// is named alone.
    #[test]
    fn slow_endpoints_at_the_ends_of_their_range() {
        use crate::run::test_endpoint;
        let names = |eps: &[crate::run::EndpointResult]| {
            slow_endpoints(eps)
                .map(|(s, _, _)| s.iter().map(|e| e.name.clone()).collect::<Vec<_>>())
        };
        // 3× the rest's mean, exactly half the time: named.
        let at = [
            test_endpoint("GET /a", &[3_000; 100]),
            test_endpoint("GET /b", &[1_000; 300]),
        ];
        assert_eq!(names(&at), Some(vec!["GET /a".to_string()]));
        // 2.9× (and under half the time): not named.
        let under = [
            test_endpoint("GET /a", &[2_900; 100]),
            test_endpoint("GET /b", &[1_000; 300]),
        ];
        assert_eq!(names(&under), None);
        // 30× the rest's mean but 45% of the time: not named.
        let small = [
            test_endpoint("GET /a", &[30_000; 9]),
            test_endpoint("GET /b", &[1_000; 330]),
        ];
        assert_eq!(names(&small), None);
        // Two slow endpoints behind one upstream, a fast one beside them: both named.
        let two = [
            test_endpoint("GET /static", &[400; 800]),
            test_endpoint("GET /api", &[90_000; 100]),
            test_endpoint("GET /search", &[80_000; 100]),
        ];
        assert_eq!(
            names(&two),
            Some(vec!["GET /api".to_string(), "GET /search".to_string()])
        );
        // One endpoint far slower than the next: it alone.
        let one = [
            test_endpoint("GET /static", &[400; 800]),
            test_endpoint("GET /api", &[900_000; 100]),
            test_endpoint("GET /search", &[5_000; 100]),
        ];
        assert_eq!(names(&one), Some(vec!["GET /api".to_string()]));
        // A single endpoint: nothing to tell apart.
        assert_eq!(names(&at[..1]), None);
    }
}
