//! The request mix the plan looks ahead over. The engine does not know what will arrive next;
//! it predicts from what arrived: the share of each pipeline among the last requests, turned
//! into a deterministic order (largest deficit first), and for each pipeline the fan-out counts
//! of its last request (camera frames look alike). A plan is made for that prediction; when a
//! request or a count differs, the engine re-plans, and counts that.
use std::collections::VecDeque;

/// Requests remembered for the mix.
const WINDOW: usize = 64;
/// Most requests a plan looks ahead.
const MAX_HORIZON: usize = 64;
/// A change of the mix by more than this (L1 distance of the shares) re-plans.
const MIX_CHANGE: f64 = 0.25;

/// Predicts the next requests from the recent ones.
#[derive(Debug, Clone)]
pub struct Predictor {
    pipelines: usize,
    recent: VecDeque<usize>,
    /// Per pipeline, requests the planner looks ahead when it is the only one (`repeat`).
    lookahead: Vec<u32>,
    /// The shares the current plan was made with.
    planned_shares: Vec<f64>,
    /// Per pipeline: the fan-out counts of its last request, by step index.
    last_counts: Vec<Vec<(usize, u32)>>,
}

impl Predictor {
    /// `lookahead[p]` is pipeline `p`'s planning horizon; `first` is the pipeline expected
    /// first (before any request arrived).
    pub fn new(lookahead: Vec<u32>, first: usize) -> Predictor {
        let n = lookahead.len();
        let mut shares = vec![0.0; n];
        if first < n {
            shares[first] = 1.0;
        }
        Predictor {
            pipelines: n,
            recent: VecDeque::new(),
            lookahead,
            planned_shares: shares,
            last_counts: vec![Vec::new(); n],
        }
    }

    /// Notes that a request of pipeline `p` arrived (before it runs).
    pub fn arrived(&mut self, p: usize) {
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(p);
    }

    /// Notes the fan-out counts a finished request of `p` had.
    pub fn finished(&mut self, p: usize, counts: Vec<(usize, u32)>) {
        if let Some(c) = self.last_counts.get_mut(p) {
            *c = counts;
        }
    }

    /// The fan-out count to plan step `step` of pipeline `p` with, if one was seen.
    pub fn count(&self, p: usize, step: usize) -> Option<u32> {
        self.last_counts
            .get(p)?
            .iter()
            .find(|(s, _)| *s == step)
            .map(|(_, c)| *c)
    }

    /// Each pipeline's share of the recent requests (the planned shares before any arrived).
    pub fn shares(&self) -> Vec<f64> {
        if self.recent.is_empty() {
            return self.planned_shares.clone();
        }
        let mut s = vec![0.0; self.pipelines];
        for &p in &self.recent {
            s[p] += 1.0;
        }
        let n = self.recent.len() as f64;
        s.iter_mut().for_each(|x| *x /= n);
        s
    }

    /// Whether the mix moved away from the one the current plan assumed.
    pub fn mix_changed(&self) -> bool {
        let now = self.shares();
        let d: f64 = now
            .iter()
            .zip(&self.planned_shares)
            .map(|(a, b)| (a - b).abs())
            .sum();
        d > MIX_CHANGE
    }

    /// The next requests to plan for, starting after the current one, and remembers the mix
    /// they were drawn from.
    pub fn predict(&mut self) -> Vec<usize> {
        let shares = self.shares();
        self.planned_shares = shares.clone();
        let active: Vec<usize> = (0..self.pipelines).filter(|&p| shares[p] > 0.0).collect();
        let horizon = if active.len() <= 1 {
            active
                .first()
                .map_or(1, |&p| self.lookahead[p].max(1) as usize)
        } else {
            // Long enough that the rarest pipeline appears once.
            let rarest = active
                .iter()
                .map(|&p| shares[p])
                .fold(f64::INFINITY, f64::min);
            let most = active
                .iter()
                .map(|&p| self.lookahead[p] as usize)
                .max()
                .unwrap_or(1);
            ((1.0 / rarest).ceil() as usize).max(most)
        }
        .min(MAX_HORIZON);
        let mut emitted = vec![0.0; self.pipelines];
        (0..horizon)
            .map(|t| {
                let p = active
                    .iter()
                    .copied()
                    .max_by(|&a, &b| {
                        let da = shares[a] * (t + 1) as f64 - emitted[a];
                        let db = shares[b] * (t + 1) as f64 - emitted[b];
                        da.total_cmp(&db).then(b.cmp(&a))
                    })
                    .unwrap_or(0);
                emitted[p] += 1.0;
                p
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pipeline_looks_ahead_its_repeat_count() {
        let mut p = Predictor::new(vec![4, 1], 0);
        assert_eq!(p.predict(), vec![0, 0, 0, 0]);
        p.arrived(0);
        assert!(!p.mix_changed());
    }

    #[test]
    fn a_ten_to_one_mix_plans_one_rare_request_per_cycle() {
        let mut p = Predictor::new(vec![4, 1], 0);
        for i in 0..33 {
            p.arrived(if i % 11 == 10 { 1 } else { 0 });
        }
        let next = p.predict();
        assert_eq!(next.len(), 11);
        assert_eq!(next.iter().filter(|&&x| x == 1).count(), 1);
        assert!(!p.mix_changed());
    }

    #[test]
    fn a_new_even_mix_is_a_change() {
        let mut p = Predictor::new(vec![4, 4], 0);
        p.predict();
        for i in 0..8 {
            p.arrived(i % 2);
        }
        assert!(p.mix_changed());
        let next = p.predict();
        assert_eq!(next.iter().filter(|&&x| x == 1).count(), 2);
        assert!(!p.mix_changed());
    }

    #[test]
    fn counts_follow_the_last_request() {
        let mut p = Predictor::new(vec![1], 0);
        assert_eq!(p.count(0, 5), None);
        p.finished(0, vec![(5, 7), (7, 7)]);
        assert_eq!(p.count(0, 7), Some(7));
    }
}
