//! Shell analysis: parses a command line with `brush-parser` and lists every
//! simple command it would run, with the wrappers peeled off.
//!
//! The output is a list of [`Part`]s plus command-wide issues. Nothing here
//! knows about rules; [`crate::judge`] applies them.

use brush_parser::ast::{self, Command, CommandPrefixOrSuffixItem as Item, CompoundCommand};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

use crate::pattern::Arg;
use crate::start::{env_runs_code, harmless_env};
use crate::wrappers::{self, Peel};

/// Longest command line checked: 1 MiB (1,048,576 bytes). A longer command is
/// denied unparsed ([`crate::decide_with`]). Parsing the worst 1 MiB shape (about
/// 150,000 simple commands) takes about 1.4 s and 400 MB natively, which is why
/// the host runs the policy plugin with larger limits than other plugins
/// (`toolhost_runtime::Host::new`).
pub const MAX_INPUT: usize = 1024 * 1024;
/// Deepest nesting of `(`, `{`, `$(` etc. handed to the parser (its grammar
/// recurses per level); deeper input is asked about unparsed.
pub const MAX_NESTING: usize = 48;
/// Most nested re-parses followed: each `$(…)`, `bash -c`, `eval` or `${…}`
/// level counts twice (its word and its program).
pub const MAX_DEPTH: usize = 16;

/// How a layer of a command relates to the layer inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// The program that actually runs (the innermost layer).
    Program,
    /// A wrapper that just runs the next layer (`env`, `timeout`, `nice`…):
    /// it needs no rule of its own.
    Wrapper,
    /// A wrapper that needs an allow rule naming it (`sudo`, `doas`): the
    /// text says why. `default = "allow"` still asks about it.
    Guarded(String),
    /// A wrapper or shell run by path (`/usr/bin/env`, `./bash -c`): only an
    /// allow rule spelling out the path covers it, but `default = "allow"`
    /// allows it as it allows any program run by path.
    ByPath(String),
    /// A shell running a script string (`bash -c '…'`, `eval '…'`); the
    /// script's commands are separate parts.
    Script,
}

/// One view of a simple command: its words from the program name on.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The words, program first (quotes removed).
    pub words: Vec<Arg>,
    /// What the layer is.
    pub kind: LayerKind,
    /// For a program run by path, where it runs from (for messages).
    pub path_note: Option<String>,
}

impl Layer {
    /// The words joined for messages.
    pub fn text(&self) -> String {
        join(&self.words)
    }
}

/// One simple command found in the input.
#[derive(Clone, Debug)]
pub struct Part {
    /// The command as written (outermost layer) down to the peeled program.
    pub layers: Vec<Layer>,
    /// Reasons this part may at most be asked about whatever the rules say
    /// (an unresolvable program name, an unknown wrapper option, a script
    /// that is not a static string…).
    pub issues: Vec<String>,
    /// What the part does beyond running its program: writes by redirection,
    /// environment variables that change what runs (`PATH`, `LD_PRELOAD`).
    /// An allow *rule* never covers these (so `cat *` does not allow
    /// `cat x > y`: it is asked); under `default = "allow"` they are allowed.
    pub effects: Vec<String>,
    /// What the part runs that the policy cannot read: an interpreter's
    /// inline code (`python3 -c`, `perl -e`, `awk 'BEGIN{system(…)}'`), a `git
    /// -c` setting that runs a program, a word only known at run time where
    /// `find` takes its actions, `LD_PRELOAD=`/`PATH=`/`BASH_ENV=` before a
    /// command. It may do anything, so when the rules restrict something
    /// (have a deny or ask rule) the part is at most asked; rules with no
    /// deny or ask rule have nothing it could get around.
    pub opaque: Vec<String>,
}

impl Part {
    /// The whole simple command, for messages.
    pub fn text(&self) -> String {
        self.layers.first().map(Layer::text).unwrap_or_default()
    }
}

/// Where the command runs, for path-run programs.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Working directory (absolute).
    pub cwd: String,
    /// Workspace root (absolute).
    pub workspace: String,
}

/// The result of analysing a command line.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// Every simple command found, in source order (inner substitutions
    /// before the command that uses them).
    pub parts: Vec<Part>,
    /// Reasons the whole command may at most be asked about (a parse error,
    /// nesting too deep, an expansion it cannot check…).
    pub issues: Vec<String>,
    /// Side effects outside any simple command's program (a write
    /// redirection on a compound command, a shell variable set for later
    /// commands): asked about unless `default = "allow"`.
    pub effects: Vec<String>,
}

/// Joins words for messages.
pub fn join(words: &[Arg]) -> String {
    words
        .iter()
        .map(|a| a.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Analyses a command line.
pub fn analyze(command: &str, ctx: &Context) -> Analysis {
    let mut w = Walker {
        ctx,
        out: Analysis::default(),
        depth: 0,
    };
    w.program(command);
    w.out
}

/// A rough nesting depth of `(`/`{`/`[` (quotes ignored, so it over-counts:
/// that only makes the answer more cautious).
fn nesting(src: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in src.chars() {
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    // Compound-command keywords nest in the grammar too.
    let keywords = src
        .split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|')
        .filter(|w| matches!(*w, "if" | "while" | "until" | "for" | "case" | "select"))
        .count();
    max.max(keywords)
}

struct Walker<'a> {
    ctx: &'a Context,
    out: Analysis,
    depth: usize,
}

fn opts() -> ParserOptions {
    ParserOptions::default()
}

impl Walker<'_> {
    fn effect(&mut self, msg: String) {
        if !self.out.effects.contains(&msg) {
            self.out.effects.push(msg);
        }
    }

    fn issue(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        if !self.out.issues.contains(&msg) {
            self.out.issues.push(msg);
        }
    }

    /// Parses and walks a (possibly nested) program text.
    fn program(&mut self, src: &str) {
        if self.depth > MAX_DEPTH {
            self.issue("the command nests substitutions or `bash -c`/`eval` too deeply to check");
            return;
        }
        if src.len() > MAX_INPUT {
            self.issue(format!(
                "the command is longer than {MAX_INPUT} bytes, too long to check"
            ));
            return;
        }
        if nesting(src) > MAX_NESTING {
            self.issue("the command nests too deeply to check");
            return;
        }
        let mut parser = Parser::new(std::io::BufReader::new(src.as_bytes()), &opts());
        match parser.parse_program() {
            Ok(program) => {
                self.depth += 1;
                for list in &program.complete_commands {
                    self.compound_list(list);
                }
                self.depth -= 1;
            }
            Err(e) => self.issue(format!("the shell parser could not parse it ({e})")),
        }
    }

    fn compound_list(&mut self, list: &ast::CompoundList) {
        for item in &list.0 {
            self.and_or(&item.0);
        }
    }

    fn and_or(&mut self, list: &ast::AndOrList) {
        self.pipeline(&list.first);
        for next in &list.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline) {
        for cmd in &p.seq {
            self.command(cmd);
        }
    }

    fn command(&mut self, cmd: &Command) {
        match cmd {
            Command::Simple(sc) => self.simple(sc),
            Command::Compound(cc, redirects) => {
                self.compound(cc);
                self.redirect_list(redirects.as_ref());
            }
            Command::Function(f) => {
                self.compound(&f.body.0);
                self.redirect_list(f.body.1.as_ref());
            }
            Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr);
                self.redirect_list(redirects.as_ref());
            }
        }
    }

    fn redirect_list(&mut self, list: Option<&ast::RedirectList>) {
        let mut effects = Vec::new();
        for r in list.iter().flat_map(|l| l.0.iter()) {
            self.redirect(r, &mut effects);
        }
        for e in effects {
            self.effect(e);
        }
    }

    fn extended_test(&mut self, e: &ast::ExtendedTestExpr) {
        use ast::ExtendedTestExpr as E;
        match e {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a);
                self.extended_test(b);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a),
            E::UnaryTest(_, w) => {
                self.word(w);
            }
            E::BinaryTest(_, a, b) => {
                self.word(a);
                self.word(b);
            }
        }
    }

    fn compound(&mut self, cc: &CompoundCommand) {
        match cc {
            CompoundCommand::Arithmetic(a) => self.arith(&a.expr.value),
            CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arith(&e.value);
                }
                self.compound_list(&f.body.list);
            }
            CompoundCommand::BraceGroup(b) => self.compound_list(&b.list),
            CompoundCommand::Subshell(s) => self.compound_list(&s.list),
            CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(w);
                }
                self.compound_list(&f.body.list);
            }
            CompoundCommand::CaseClause(c) => {
                self.word(&c.value);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(p);
                    }
                    if let Some(list) = &item.cmd {
                        self.compound_list(list);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.compound_list(&i.condition);
                self.compound_list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.compound_list(c);
                    }
                    self.compound_list(&e.body);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.compound_list(&w.0);
                self.compound_list(&w.1.list);
            }
            CompoundCommand::Coprocess(c) => self.command(&c.body),
        }
    }

    /// Arithmetic text: only command substitutions inside matter.
    fn arith(&mut self, text: &str) {
        if text.contains("$(") || text.contains('`') || text.contains("${") {
            self.word_text(text);
        }
    }

    fn word(&mut self, w: &ast::Word) -> Arg {
        self.word_text(&w.value)
    }

    /// Converts one shell word to an [`Arg`], judging any commands it runs.
    fn word_text(&mut self, raw: &str) -> Arg {
        if self.depth > MAX_DEPTH {
            self.issue("the command nests substitutions or `bash -c`/`eval` too deeply to check");
            return Arg::unresolved(raw);
        }
        match word::parse(raw, &opts()) {
            Ok(pieces) => {
                self.depth += 1;
                let mut text = String::new();
                let resolved = self.pieces(raw, &pieces, false, &mut text);
                self.depth -= 1;
                if resolved {
                    Arg::literal(text)
                } else {
                    Arg::unresolved(raw)
                }
            }
            Err(e) => {
                self.issue(format!(
                    "the shell parser could not parse the word `{raw}` ({e})"
                ));
                Arg::unresolved(raw)
            }
        }
    }

    /// Appends the static value of `pieces` to `out`; returns `false` when
    /// some piece is only known at run time.
    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        out: &mut String,
    ) -> bool {
        let mut resolved = true;
        for p in pieces {
            match &p.piece {
                WordPiece::Text(t) => {
                    if !quoted && unquoted_is_pattern(t) {
                        resolved = false;
                    }
                    out.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => out.push_str(t),
                WordPiece::AnsiCQuotedText(t) => {
                    if t.contains('\\') {
                        resolved = false;
                    }
                    out.push_str(t);
                }
                WordPiece::DoubleQuotedSequence(inner) => {
                    resolved &= self.pieces(raw, inner, true, out);
                }
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, true, out);
                    resolved = false; // translated at run time
                }
                WordPiece::EscapeSequence(s) => {
                    let c = s.strip_prefix('\\').unwrap_or(s);
                    if c == "\n" {
                        // line continuation: nothing
                    } else if quoted && !matches!(c, "$" | "`" | "\"" | "\\") {
                        out.push_str(s);
                    } else {
                        out.push_str(c);
                    }
                }
                WordPiece::TildeExpansion(_) => resolved = false,
                WordPiece::ParameterExpansion(_) => {
                    resolved = false;
                    let src = raw.get(p.start_index..p.end_index).unwrap_or(raw);
                    if let Some(inner) = src.strip_prefix("${").and_then(|s| s.strip_suffix('}')) {
                        if inner.contains('$') || inner.contains('`') || inner.contains("<(") {
                            self.word_text(inner);
                        }
                    } else if src == raw && (raw.contains("$(") || raw.contains('`')) {
                        self.issue(format!("cannot check the expansion in `{raw}`"));
                    }
                }
                WordPiece::CommandSubstitution(s) => {
                    resolved = false;
                    self.program(s);
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    resolved = false;
                    self.program(&unescape_backquoted(s));
                }
                WordPiece::ArithmeticExpression(e) => {
                    resolved = false;
                    self.arith(&e.value);
                }
            }
        }
        resolved
    }

    fn redirect(&mut self, r: &ast::IoRedirect, effects: &mut Vec<String>) {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        match r {
            R::File(_, kind, target) => {
                let writes = matches!(kind, K::Write | K::Append | K::Clobber | K::ReadAndWrite);
                match target {
                    T::Filename(w) => {
                        let arg = self.word(w);
                        if writes && !harmless_sink(&arg) {
                            effects.push(format!("writes to `{}` by redirection", arg.text));
                        }
                    }
                    T::Fd(_) => {}
                    T::Duplicate(w) => {
                        let arg = self.word(w);
                        let fd = arg.resolved
                            && (arg.text == "-"
                                || arg
                                    .text
                                    .trim_end_matches('-')
                                    .chars()
                                    .all(|c| c.is_ascii_digit()));
                        if !fd && !harmless_sink(&arg) {
                            effects.push(format!("writes to `{}` by redirection", arg.text));
                        }
                    }
                    T::ProcessSubstitution(_, sub) => self.compound_list(&sub.list),
                }
            }
            R::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &opts()) {
                        Ok(pieces) => {
                            self.depth += 1;
                            let mut sink = String::new();
                            self.pieces(&doc.doc.value, &pieces, true, &mut sink);
                            self.depth -= 1;
                        }
                        Err(e) => self.issue(format!(
                            "the shell parser could not parse a here-document ({e})"
                        )),
                    }
                }
            }
            R::HereString(_, w) => {
                self.word(w);
            }
            R::OutputAndError(w, _) => {
                let arg = self.word(w);
                if !harmless_sink(&arg) {
                    effects.push(format!("writes to `{}` by redirection", arg.text));
                }
            }
        }
    }

    fn simple(&mut self, sc: &ast::SimpleCommand) {
        let mut acc = SimpleAcc::default();
        for item in sc.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, &mut acc);
        }
        if let Some(name) = &sc.word_or_name {
            let a = self.word(name);
            acc.words.push(a);
        }
        for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, &mut acc);
        }
        let SimpleAcc {
            words,
            mut effects,
            assigned,
        } = acc;
        let mut opaque = Vec::new();
        for name in &assigned {
            if !words.is_empty() && env_runs_code(name) {
                opaque.push(format!(
                    "`{name}=…` can make the program (or the loader) run other code"
                ));
            }
            if !harmless_env(name) {
                effects.push(if words.is_empty() {
                    format!("sets the shell variable `{name}` for later commands")
                } else {
                    format!("sets the environment variable `{name}` for the program")
                });
            }
        }
        if words.is_empty() {
            // Assignments or redirections only: no program runs.
            for e in effects {
                self.effect(e);
            }
            return;
        }
        let mut part = self.peel(words, effects);
        part.opaque.splice(0..0, opaque);
        self.out.parts.push(part);
    }

    fn item(&mut self, item: &Item, in_prefix: bool, acc: &mut SimpleAcc) {
        match item {
            Item::IoRedirect(r) => self.redirect(r, &mut acc.effects),
            Item::Word(w) => {
                let a = self.word(w);
                acc.words.push(a);
            }
            Item::AssignmentWord(assign, w) => {
                if in_prefix && acc.words.is_empty() {
                    self.assignment(assign);
                    acc.assigned.push(assignment_name(assign));
                } else {
                    // An argument that looks like an assignment (`declare x=1`).
                    let a = self.word(w);
                    acc.words.push(a);
                }
            }
            Item::ProcessSubstitution(kind, sub) => {
                self.compound_list(&sub.list);
                let sigil = match kind {
                    ast::ProcessSubstitutionKind::Read => "<(…)",
                    ast::ProcessSubstitutionKind::Write => ">(…)",
                };
                acc.words.push(Arg::unresolved(sigil));
            }
        }
    }

    fn assignment(&mut self, a: &ast::Assignment) {
        if let ast::AssignmentName::ArrayElementName(_, index) = &a.name {
            self.word_text(index);
        }
        match &a.value {
            ast::AssignmentValue::Scalar(w) => {
                self.word(w);
            }
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        self.word(k);
                    }
                    self.word(v);
                }
            }
        }
    }

    /// Peels wrappers off a simple command's words, following shell
    /// scripts (`bash -c`, `eval`) into new parts.
    fn peel(&mut self, words: Vec<Arg>, mut effects: Vec<String>) -> Part {
        let mut issues = Vec::new();
        let mut opaque = Vec::new();
        let mut layers = Vec::new();
        let mut cur = words;
        while let Some(name) = cur.first() {
            if !name.resolved {
                issues.push(format!(
                    "the program name `{}` is only known at run time",
                    name.text
                ));
                layers.push(Layer {
                    words: cur,
                    kind: LayerKind::Program,
                    path_note: None,
                });
                break;
            }
            let name = name.text.clone();
            let base = basename(&name).to_string();
            let path_note = name.contains('/').then(|| self.path_note(&name));
            let guard_path = name
                .contains('/')
                .then(|| format!("`{name}` is run by path"));
            match wrappers::peel(&base, &cur[1..]) {
                Peel::NotWrapper => {
                    if let Some(script) = wrappers::shell_script(&base, &cur[1..]) {
                        let kind = match guard_path {
                            Some(g) => LayerKind::ByPath(g),
                            None => LayerKind::Script,
                        };
                        layers.push(Layer {
                            words: cur,
                            kind,
                            path_note,
                        });
                        match script {
                            Ok(text) => self.program(&text),
                            Err(why) => issues.push(why),
                        }
                    } else {
                        let found = wrappers::embedded(&base, &cur[1..]);
                        opaque.extend(found.opaque);
                        for script in &found.scripts {
                            self.program(script);
                        }
                        self.embedded_commands(found.commands);
                        layers.push(Layer {
                            words: cur,
                            kind: LayerKind::Program,
                            path_note,
                        });
                    }
                    break;
                }
                Peel::NoCommand => {
                    layers.push(Layer {
                        words: cur,
                        kind: LayerKind::Program,
                        path_note,
                    });
                    break;
                }
                Peel::Unknown(why) => {
                    issues.push(why);
                    layers.push(Layer {
                        words: cur,
                        kind: LayerKind::Program,
                        path_note,
                    });
                    break;
                }
                Peel::Inner {
                    inner,
                    env,
                    privileged,
                    notes,
                } => {
                    for n in env {
                        if env_runs_code(&n) {
                            opaque.push(format!(
                                "`{base} {n}=…` can make the program (or the loader) run other code"
                            ));
                        }
                        if !harmless_env(&n) {
                            effects.push(format!(
                                "sets the environment variable `{n}` for the program"
                            ));
                        }
                    }
                    issues.extend(notes);
                    let kind = match (privileged, guard_path) {
                        (true, _) => LayerKind::Guarded(format!(
                            "`{base}` runs the command with elevated privileges"
                        )),
                        (false, Some(g)) => LayerKind::ByPath(g),
                        (false, None) => LayerKind::Wrapper,
                    };
                    layers.push(Layer {
                        words: cur,
                        kind,
                        path_note,
                    });
                    cur = inner;
                }
            }
        }
        issues.dedup();
        opaque.dedup();
        Part {
            layers,
            issues,
            effects,
            opaque,
        }
    }

    /// Judges the commands a program runs from its arguments (`find -exec
    /// CMD ;`) as parts of their own.
    fn embedded_commands(&mut self, commands: Vec<Vec<Arg>>) {
        if commands.is_empty() {
            return;
        }
        if self.depth > MAX_DEPTH {
            self.issue("the command nests substitutions or `bash -c`/`eval` too deeply to check");
            return;
        }
        self.depth += 1;
        for words in commands {
            let part = self.peel(words, Vec::new());
            self.out.parts.push(part);
        }
        self.depth -= 1;
    }

    /// Describes a program run by path.
    fn path_note(&self, name: &str) -> String {
        let abs = normalize(if name.starts_with('/') {
            name.to_string()
        } else {
            format!("{}/{}", self.ctx.cwd, name)
        });
        let ws = self.ctx.workspace.trim_end_matches('/');
        let inside = !ws.is_empty() && (abs == ws || abs.starts_with(&format!("{ws}/")));
        if inside {
            format!("`{name}` is a program inside the workspace")
        } else {
            format!("`{name}` is run by path")
        }
    }
}

/// What a simple command's items add up to.
#[derive(Default)]
struct SimpleAcc {
    words: Vec<Arg>,
    effects: Vec<String>,
    assigned: Vec<String>,
}

fn assignment_name(a: &ast::Assignment) -> String {
    match &a.name {
        ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
            n.clone()
        }
    }
}

/// `true` for redirection targets that write nothing anyone reads later.
fn harmless_sink(arg: &Arg) -> bool {
    arg.resolved
        && matches!(
            arg.text.as_str(),
            "/dev/null" | "/dev/stdout" | "/dev/stderr"
        )
}

/// `true` when unquoted text would undergo pathname or brace expansion.
fn unquoted_is_pattern(t: &str) -> bool {
    t.contains(['*', '?', '['])
        || (t.contains('{') && t.contains('}') && (t.contains(',') || t.contains("..")))
}

/// Undoes the backslash escapes a backquoted substitution gives its body.
fn unescape_backquoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '`' | '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// The last path component of a program name.
pub fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Lexically normalises an absolute path (`.` and `..` removed).
fn normalize(path: String) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}
