//! Typed access to a node's ONNX attributes.
use super::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};

pub struct Attrs<'a>(pub &'a NodeProto);

impl<'a> Attrs<'a> {
    fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.0
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|a| a.i)
    }
    pub fn int_or(&self, name: &str, d: i64) -> i64 {
        self.int(name).unwrap_or(d)
    }
    pub fn float(&self, name: &str) -> Option<f32> {
        self.get(name).and_then(|a| a.f)
    }
    pub fn float_or(&self, name: &str, d: f32) -> f32 {
        self.float(name).unwrap_or(d)
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.get(name).map(|a| a.floats.clone())
    }
    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    pub fn string_or(&self, name: &str, d: &str) -> String {
        self.string(name).unwrap_or_else(|| d.to_string())
    }
    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }
    pub fn tensor(&self, name: &str) -> Option<&'a TensorProto> {
        self.get(name).and_then(|a| a.t.as_ref())
    }
    pub fn graph(&self, name: &str) -> Option<&'a GraphProto> {
        self.get(name).and_then(|a| a.g.as_ref())
    }
}
