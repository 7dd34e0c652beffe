//! Vulkan backend: device, 2.5D texture tensors and compute kernels.
