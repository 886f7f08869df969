//! `tokscope sql`: the SQL shell. On a terminal, rustyline gives line
//! editing and up-arrow recall; piped input is read as it is. Statements are
//! kept in a history file.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use datafusion::prelude::SessionContext;
use tokscope::engine::distributed::Remote;
use tokscope::engine::{self, UdfConfig};
use tokscope::export::{self, OutputFormat};

use super::args::{choice, EngineArgs, TableArgs, UdfArgs};
use super::query::session;

/// `tokscope sql`: an interactive SQL shell over a dataset.
#[derive(Debug, Clone, clap::Args)]
pub struct SqlArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    pub data: String,
    #[command(flatten)]
    pub udf: UdfArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Result format.
    #[arg(long, default_value_t = OutputFormat::Table, value_parser = choice::<OutputFormat>(OutputFormat::NAMES))]
    pub format: OutputFormat,
    /// History file (default ~/.tokscope_history).
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Keep no history file.
    #[arg(long)]
    pub no_history: bool,
    /// Allow DDL/DML statements (read-only by default, like `tokscope query`).
    #[arg(long)]
    pub allow_write: bool,
    #[command(flatten)]
    pub table: TableArgs,
}

const HELP: &str = "Statements end with `;` at the end of a line. Commands: \\d (tables), \\history, !N (re-run history entry N), \\q (quit).";

/// Runs `tokscope sql`: statements from stdin, results to stdout, errors to
/// stderr. Returns an error at the end when any statement failed, so a piped
/// script's exit status says whether it all ran.
pub fn run_shell(args: &SqlArgs) -> anyhow::Result<()> {
    if args.format == OutputFormat::Parquet {
        anyhow::bail!("the SQL shell prints table, csv or json; use `tokscope query --format parquet --output F`");
    }
    let udf = args.udf.config()?;
    let rt = engine::runtime()?;
    let source = Source { data: args.data.clone(), udf, engine: args.engine.remote(), limit: args.udf.memory.limit() };
    let ctx = rt.block_on(source.open())?;
    let history_path = if args.no_history {
        None
    } else {
        args.history.clone().or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".tokscope_history")))
    };
    let stdin = std::io::stdin();
    let mut shell = Shell {
        ctx,
        source,
        rt,
        format: args.format,
        table: args.table,
        allow_write: args.allow_write,
        history: Vec::new(),
        history_path,
        failed: 0,
    };
    shell.load_history();
    let mut input = if stdin.is_terminal() && std::io::stderr().is_terminal() {
        let mut editor = rustyline::DefaultEditor::new().map_err(|e| anyhow::anyhow!("line editor: {e}"))?;
        for sql in &shell.history {
            // In-memory history cannot fail to take an entry; a failure only loses recall.
            let _ = editor.add_history_entry(sql.as_str());
        }
        eprintln!("tokscope sql over {}. {HELP}", args.data);
        Input::Editor(Box::new(editor))
    } else {
        Input::Piped(stdin.lock().lines())
    };
    shell.run(&mut input)?;
    match shell.failed {
        0 => Ok(()),
        n => anyhow::bail!("{n} statement(s) failed"),
    }
}

/// Where the shell's lines come from: a terminal, through rustyline (line
/// editing, up-arrow recall of earlier statements, Ctrl-C to drop the
/// statement being typed, Ctrl-D to quit), or a pipe, read as it is.
enum Input<R> {
    Editor(Box<rustyline::DefaultEditor>),
    Piped(std::io::Lines<R>),
}

/// One read from [`Input`].
enum Line {
    Text(String),
    /// Ctrl-C: forget the statement typed so far.
    Cancel,
    End,
}

impl<R: BufRead> Input<R> {
    /// The next line; `continued`: inside a statement (the prompt says so).
    fn next_line(&mut self, continued: bool) -> anyhow::Result<Line> {
        match self {
            Input::Piped(lines) => match lines.next() {
                Some(line) => Ok(Line::Text(line.map_err(|e| anyhow::anyhow!("reading stdin: {e}"))?)),
                None => Ok(Line::End),
            },
            Input::Editor(editor) => match editor.readline(if continued { "     -> " } else { "tokscope> " }) {
                Ok(line) => Ok(Line::Text(line)),
                Err(rustyline::error::ReadlineError::Interrupted) => Ok(Line::Cancel),
                Err(rustyline::error::ReadlineError::Eof) => Ok(Line::End),
                Err(e) => Err(anyhow::anyhow!("line editor: {e}")),
            },
        }
    }

    /// Makes a statement recallable with the up arrow (terminal only).
    fn recall(&mut self, sql: &str) {
        if let Input::Editor(editor) = self {
            let _ = editor.add_history_entry(sql);
        }
    }
}

/// What the shell's session reads, to open it again.
struct Source {
    data: String,
    udf: UdfConfig,
    engine: Option<Remote>,
    limit: engine::MemoryLimit,
}

impl Source {
    async fn open(&self) -> tokscope::Result<SessionContext> {
        session(&self.data, &self.udf, self.engine.as_ref(), &self.limit).await
    }
}

struct Shell {
    ctx: SessionContext,
    source: Source,
    rt: tokio::runtime::Runtime,
    format: OutputFormat,
    table: TableArgs,
    allow_write: bool,
    history: Vec<String>,
    history_path: Option<PathBuf>,
    failed: usize,
}

impl Shell {
    fn load_history(&mut self) {
        // A missing or unreadable history file only means no history yet.
        if let Some(text) = self.history_path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            self.history = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
        }
    }

    /// Appends a statement (on one line) to the history and its file, and
    /// makes it recallable in `input`'s line editor.
    fn remember<R: BufRead>(&mut self, sql: &str, input: &mut Input<R>) {
        let one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(p) = &self.history_path {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .and_then(|mut f| writeln!(f, "{one_line}"));
            if let Err(e) = appended {
                eprintln!("warning: history file {}: {e}", p.display());
            }
        }
        input.recall(&one_line);
        self.history.push(one_line);
    }

    fn run<R: BufRead>(&mut self, input: &mut Input<R>) -> anyhow::Result<()> {
        let mut buf = String::new();
        loop {
            let line = match input.next_line(!buf.is_empty())? {
                Line::Text(line) => line,
                Line::Cancel => {
                    buf.clear();
                    continue;
                }
                Line::End => break,
            };
            let t = line.trim();
            if buf.is_empty() {
                match t {
                    "" => continue,
                    "\\q" | "\\quit" | "quit" | "exit" | ".quit" => return Ok(()),
                    "\\?" | "help" | "\\h" => println!("{HELP}"),
                    "\\history" => {
                        for (i, h) in self.history.iter().enumerate() {
                            println!("{:>4}  {h}", i + 1);
                        }
                    }
                    "\\d" | ".tables" => self.execute("SHOW TABLES"),
                    _ if t.starts_with('!') => match t[1..]
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|i| self.history.get(i))
                    {
                        Some(sql) => {
                            let sql = sql.clone();
                            println!("{sql}");
                            self.execute(sql.trim_end_matches(';'));
                            self.remember(&sql, input);
                        }
                        None => {
                            eprintln!("error: no history entry {t:?}");
                            self.failed += 1;
                        }
                    },
                    _ => {}
                }
                if t.starts_with('\\') || t.starts_with('!') || matches!(t, "help" | ".tables") {
                    continue;
                }
            }
            buf.push_str(&line);
            buf.push('\n');
            if t.ends_with(';') {
                let sql = buf.trim().trim_end_matches(';').to_string();
                buf.clear();
                self.execute(&sql);
                self.remember(&format!("{sql};"), input);
            }
        }
        // A last statement without `;` at end of input still runs.
        let sql = buf.trim().trim_end_matches(';').to_string();
        if !sql.is_empty() {
            self.execute(&sql);
            self.remember(&format!("{sql};"), input);
        }
        Ok(())
    }

    /// Runs `sql`; when a compaction replaced a file the session was told of,
    /// opens the dataset again (views made in the session go with it) and
    /// runs the statement over the new file list.
    fn run_statement(&mut self, sql: &str) -> tokscope::Result<Vec<datafusion::arrow::record_batch::RecordBatch>> {
        let mut result = self.rt.block_on(engine::run_sql(&self.ctx, sql, self.allow_write));
        for _ in 0..3 {
            match &result {
                Err(e) if e.is_vanished_file() => {
                    eprintln!("note: the dataset changed under the session (a commit replaced files); opened it again");
                    self.ctx = self.rt.block_on(self.source.open())?;
                    result = self.rt.block_on(engine::run_sql(&self.ctx, sql, self.allow_write));
                }
                _ => break,
            }
        }
        result
    }

    fn execute(&mut self, sql: &str) {
        let result = self.run_statement(sql).and_then(|batches| {
            let mut out = std::io::stdout().lock();
            // The width is read per statement: the terminal may have been resized.
            export::write_batches(&batches, self.format, &mut out, &self.table.layout(&[]))?;
            out.flush().map_err(|e| tokscope::Error::io("stdout", e))
        });
        if let Err(e) = result {
            eprint!("{}", super::errors::render(&e));
            self.failed += 1;
        }
    }
}
