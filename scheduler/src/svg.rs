//! Residency timeline as SVG.
