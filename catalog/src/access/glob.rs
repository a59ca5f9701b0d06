//! The globs of a rule's `tools`.

/// `*` (any run, also empty) and `?` (one character) over the whole of
/// `name`; everything else is literal. Iterative with one backtrack
/// point, so it is linear in practice and never worse than
/// `O(pattern × name)`.
pub fn glob(pattern: &str, name: &str) -> bool {
    // Tool names are ASCII; bytes then are characters, and nothing is
    // allocated per match.
    if pattern.is_ascii() && name.is_ascii() {
        return glob_in(pattern.as_bytes(), name.as_bytes(), b'*', b'?');
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob_in(&p, &n, '*', '?')
}

fn glob_in<T: PartialEq + Copy>(p: &[T], n: &[T], any_run: T, any_one: T) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(&c) if c == any_run => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == any_one || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == any_run)
}
