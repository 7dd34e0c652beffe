//! Embedded SPIR-V of every `shaders/*.comp`, compiled by build.rs in fp16 and fp32 variants.

include!(concat!(env!("OUT_DIR"), "/shaders.rs"));
