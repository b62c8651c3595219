//! Built-in problem lists, in benchdnn batch-file form. The lists live in
//! `lists/` so the peer scripts read exactly the same problems.

const LISTS: [(&str, &str); 1] = [("resnet50", include_str!("lists/resnet50.txt"))];

pub fn lookup(name: &str) -> Option<&'static str> {
    LISTS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

pub fn names() -> Vec<&'static str> {
    LISTS.iter().map(|(n, _)| *n).collect()
}
