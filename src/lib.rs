//! texstream: run several neural networks in succession on a Vulkan GPU under one hard memory cap.
