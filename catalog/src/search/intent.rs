//! What a query asks for besides its words: read or change, one thing or many; how a tool that disagrees is discounted.

/// How much a tool whose HTTP method disagrees with the query's
/// [`Intent`] keeps of its score: a read answered by a tool that changes
/// something, and a change answered by a `GET`. A read task rarely wants
/// a write tool; a change is sometimes done by a `GET` (an API that
/// triggers by `GET`), so it is discounted less. Chosen on the
/// development sets (0.8/0.8, 0.6/0.8 and 0.5/0.7 measured; the last best
/// on both).
pub(super) const READ_MISMATCH: f32 = 0.5;
pub(super) const WRITE_MISMATCH: f32 = 0.7;

/// What a tool keeps of its score when the query asks for one item and
/// its path addresses a collection, or the other way round ([`Count`]).
/// A weaker sign than the intent (a collection path may take an id in its
/// query string), so a milder discount; 0.8 and 0.6 measured on the
/// development sets, equal at 5.
pub(super) const COUNT_MISMATCH: f32 = 0.8;

/// Whether a query asks for one item or for many, by its words
/// ([`ONE_WORDS`], [`MANY_WORDS`]); neither or both is `Any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Count {
    Any,
    One,
    Many,
}

/// Words of a task about one item. Sorted.
pub(super) const ONE_WORDS: &[&str] = &[
    "given",
    "individual",
    "one",
    "particular",
    "single",
    "specific",
];
/// Words of a task about many items. Sorted.
pub(super) const MANY_WORDS: &[&str] = &["all", "each", "enumerate", "every", "list"];

impl Count {
    /// The count a query's words, lower-cased, ask for.
    pub(super) fn of(words: &[String]) -> Count {
        let has = |list: &[&str]| {
            words
                .iter()
                .any(|w| list.binary_search(&w.as_str()).is_ok())
        };
        match (has(ONE_WORDS), has(MANY_WORDS)) {
            (true, false) => Count::One,
            (false, true) => Count::Many,
            _ => Count::Any,
        }
    }

    /// What a tool keeps of its score; `item` says whether its path
    /// addresses one item.
    pub(super) fn factor(self, item: bool) -> f32 {
        match (self, item) {
            (Count::One, false) | (Count::Many, true) => COUNT_MISMATCH,
            _ => 1.0,
        }
    }
}

/// Whether a query reads or changes something, as its leading word says
/// ([`Intent::of`]): a verb of [`READ_VERBS`] or [`WRITE_VERBS`], or a
/// question word (a question asks to read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Intent {
    /// No leading verb the tables know, or a read verb followed by a
    /// change ("find and delete ...").
    Unknown,
    Read,
    Write,
}

/// Leading words of a task that reads: verbs, and question words (a
/// question asks for something to read). Sorted.
#[rustfmt::skip]
pub(super) const READ_VERBS: &[&str] = &[
    "are", "browse", "can", "check", "compare", "could", "count", "describe", "did", "display",
    "do", "does", "download", "explore", "export", "fetch", "find", "get", "has", "have", "how",
    "identify", "inspect", "is", "list", "look", "lookup", "preview", "print", "query", "read",
    "retrieve", "search", "see", "should", "show", "tell", "view", "was", "were", "what", "when",
    "where", "which", "who", "whom", "whose", "why",
];

/// Leading words of a task that changes something. Sorted.
#[rustfmt::skip]
pub(super) const WRITE_VERBS: &[&str] = &[
    "abort", "accept", "activate", "add", "apply", "approve", "archive", "assign", "attach", "ban",
    "block", "cancel", "change", "clear", "close", "comment", "copy", "create", "deactivate",
    "decline", "delete", "deny", "destroy", "detach", "disable", "dismiss", "drop", "edit",
    "enable", "erase", "follow", "generate", "grant", "hide", "import", "install", "invite",
    "kick", "launch", "link", "lock", "make", "mark", "merge", "modify", "move", "mute", "pause",
    "pin", "ping", "place", "play", "post", "publish", "purge", "put", "queue", "react",
    "register", "reject", "remove", "rename", "reopen", "replace", "reply", "reset", "resolve",
    "restart", "restore", "resume", "retry", "revoke", "rotate", "run", "save", "schedule", "send",
    "set", "share", "skip", "star", "start", "stop", "submit", "subscribe", "suspend", "sync",
    "tag", "terminate", "test", "transfer", "trigger", "turn", "unarchive", "unassign", "unblock",
    "undo", "unfollow", "uninstall", "unlink", "unlock", "unmute", "unpin", "unpublish", "unstar",
    "unsubscribe", "unwatch", "update", "upload", "validate", "verify", "write",
];

/// Words before a task's verb that say nothing about it ("please", "I
/// want to", "help me"). `can`/`could`/`will`/`would` are skipped only
/// before "you" ("can you delete ..."); otherwise they ask a question.
#[rustfmt::skip]
pub(super) const LEADING_FILLERS: &[&str] = &[
    "also", "go", "help", "i", "just", "kindly", "let", "lets", "like", "me", "need", "now",
    "please", "s", "to", "us", "want", "we",
];

impl Intent {
    /// The intent of a query's words, lower-cased: after
    /// [`LEADING_FILLERS`], a verb of [`WRITE_VERBS`] is a change; one of
    /// [`READ_VERBS`] is a read unless one of the next two words is a
    /// change verb.
    pub(super) fn of(words: &[String]) -> Intent {
        let known = |list: &[&str], w: &str| list.binary_search(&w).is_ok();
        let mut i = 0;
        while i < words.len() {
            let w = words[i].as_str();
            let asks_you = matches!(w, "can" | "could" | "will" | "would")
                && words.get(i + 1).is_some_and(|n| n == "you");
            if asks_you {
                i += 2;
            } else if known(LEADING_FILLERS, w) {
                i += 1;
            } else {
                break;
            }
        }
        let Some(first) = words.get(i) else {
            return Intent::Unknown;
        };
        if known(WRITE_VERBS, first) {
            Intent::Write
        } else if known(READ_VERBS, first) {
            let changes = words[i + 1..].iter().take(2).any(|w| known(WRITE_VERBS, w));
            if changes {
                Intent::Unknown
            } else {
                Intent::Read
            }
        } else {
            Intent::Unknown
        }
    }

    /// What a tool keeps of its score under this intent; `reads` says
    /// whether its HTTP method is `GET` or `HEAD`.
    pub(super) fn factor(self, reads: bool) -> f32 {
        match (self, reads) {
            (Intent::Read, false) => READ_MISMATCH,
            (Intent::Write, true) => WRITE_MISMATCH,
            _ => 1.0,
        }
    }
}
