//! Where things are in a workload file: the line and column of a pipeline's step, so that
//! errors found after parsing (types, names, cycles) point at the text like parse errors do.
//! serde does not keep spans, so this scans the (already valid) RON text: strings and comments
//! are skipped, brackets counted.

/// A position in the file, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub col: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The text's significant characters (outside strings and comments) with their byte offsets;
/// string literals are kept as one `"` each, their content in `strings`.
struct Scan {
    /// (byte offset, char) of every character outside comments; string contents are dropped.
    chars: Vec<(usize, char)>,
    /// For each `"` kept in `chars`: the string's content.
    strings: Vec<(usize, String)>,
}

fn scan(text: &str) -> Scan {
    let mut chars = Vec::new();
    let mut strings = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        match c {
            '/' if it.peek().is_some_and(|&(_, n)| n == '/') => {
                for (_, n) in it.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            '/' if it.peek().is_some_and(|&(_, n)| n == '*') => {
                it.next();
                let mut prev = ' ';
                for (_, n) in it.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
            }
            '"' => {
                let mut s = String::new();
                while let Some((_, n)) = it.next() {
                    match n {
                        '\\' => {
                            if let Some((_, e)) = it.next() {
                                s.push(e);
                            }
                        }
                        '"' => break,
                        _ => s.push(n),
                    }
                }
                strings.push((i, s));
                chars.push((i, '"'));
            }
            c if c.is_whitespace() => {}
            c => chars.push((i, c)),
        }
    }
    Scan { chars, strings }
}

fn position(text: &str, offset: usize) -> Position {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |n| before.len() - n - 1)
        + 1;
    Position { line, col }
}

/// The position of step `step` (0-based) of the pipeline named `pipeline`, if the text is a
/// workload with that pipeline.
pub fn step_position(text: &str, pipeline: &str, step: usize) -> Option<Position> {
    field_element_position(text, pipeline, "steps", step)
}

/// The position of element `n` (0-based) of the list under field `field` (`steps`, `inputs`,
/// `outputs`) of the pipeline named `pipeline`.
pub fn field_element_position(
    text: &str,
    pipeline: &str,
    field: &str,
    n: usize,
) -> Option<Position> {
    let s = scan(text);
    let string_at = |off: usize| s.strings.iter().find(|(o, _)| *o == off).map(|(_, v)| v);
    // The pipeline's `name: "<pipeline>"`, then the next `steps:` key after it.
    let ident_before = |k: usize, word: &str| -> bool {
        // `word` spelled out just before position k (then a ':').
        let n = word.chars().count();
        k >= n
            && s.chars[k - n..k].iter().map(|&(_, c)| c).eq(word.chars())
            && (k == n || !s.chars[k - n - 1].1.is_alphanumeric())
    };
    let mut k = 0;
    let mut found = None;
    while k + 1 < s.chars.len() {
        if s.chars[k].1 == ':'
            && ident_before(k, "name")
            && s.chars[k + 1].1 == '"'
            && string_at(s.chars[k + 1].0).is_some_and(|v| v == pipeline)
        {
            // A pipeline's name is inside `PipelineSpec(`; models have names too, so require
            // the field at the same depth (before or after the name).
            found = Some(k);
            let mut depth = 0i32;
            let mut j = k + 2;
            while j < s.chars.len() {
                match s.chars[j].1 {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => {
                        depth -= 1;
                        if depth < 0 {
                            break;
                        }
                    }
                    ':' if depth == 0 && ident_before(j, field) => {
                        return nth_element(text, &s, j + 1, n);
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        k += 1;
    }
    let _ = found;
    None
}

/// Position of the `n`-th element of the list that opens at or after `start`.
fn nth_element(text: &str, s: &Scan, start: usize, n: usize) -> Option<Position> {
    let open = (start..s.chars.len()).find(|&j| s.chars[j].1 == '[')?;
    let mut depth = 0i32;
    let mut index = 0usize;
    let mut at_start = true;
    for j in open + 1..s.chars.len() {
        let c = s.chars[j].1;
        if at_start && depth == 0 && c != ']' {
            if index == n {
                return Some(position(text, s.chars[j].0));
            }
            at_start = false;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            ']' if depth == 0 => return None,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                index += 1;
                at_start = true;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"Workload(
    name: "w",
    models: [ModelSpec(name: "frame")], // a model called like the pipeline
    pipelines: [
        PipelineSpec(name: "other", steps: [Run(model: "a")]),
        PipelineSpec(
            name: "frame", /* steps: [ */
            steps: [
                Run(model: "a", inputs: {"x": "y, z"}),
                Run(model: "b"),
            ],
        ),
    ],
)"#;

    #[test]
    fn finds_each_step_of_the_named_pipeline() {
        assert_eq!(
            step_position(TEXT, "frame", 0),
            Some(Position { line: 9, col: 17 })
        );
        assert_eq!(
            step_position(TEXT, "frame", 1),
            Some(Position { line: 10, col: 17 })
        );
        assert_eq!(step_position(TEXT, "frame", 2), None);
        assert_eq!(
            step_position(TEXT, "other", 0),
            Some(Position { line: 5, col: 45 })
        );
        assert_eq!(step_position(TEXT, "ghost", 0), None);
    }

    #[test]
    fn finds_elements_of_other_list_fields() {
        let text =
            "Workload(pipelines: [PipelineSpec(\n  name: \"p\",\n  inputs: [\"a\", \"b\"],\n  \
                    steps: [],\n)])";
        assert_eq!(
            field_element_position(text, "p", "inputs", 1),
            Some(Position { line: 3, col: 17 })
        );
        assert_eq!(field_element_position(text, "p", "outputs", 0), None);
    }
}
