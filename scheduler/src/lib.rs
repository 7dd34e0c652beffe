//! Pure planning: per-model load profiles in, one residency timeline out.
