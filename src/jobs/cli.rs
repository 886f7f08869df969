//! The `tokscope job` and `tokscope sql` commands: flags, sessions and output.
//! `main.rs` only dispatches here.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use datafusion::prelude::SessionContext;

use crate::dataset::DatasetRoot;
use crate::engine::{self, UdfConfig};
use crate::error::{Error, Result};
use crate::export::{self, OutputFormat};

/// Flags that configure tokscope's UDFs (prices, model shapes).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UdfArgs {
    /// Prices for `cost` / `price_usd`: a TOML file (config/pricing.example.toml), or
    /// `litellm:FILE.json` for LiteLLM's model_prices_and_context_window.json.
    #[arg(long, value_name = "FILE")]
    pub pricing: Option<String>,
    /// Model shapes for `kv_cache` / `kv_cache_bytes` (TOML), searched before the bundled
    /// config/architectures.toml; entries may point at a Hugging Face config.json.
    #[arg(long, value_name = "FILE")]
    pub architectures: Option<PathBuf>,
}

impl UdfArgs {
    /// Loads the files named by the flags.
    pub fn config(&self) -> Result<UdfConfig> {
        UdfConfig::load(self.pricing.as_deref(), self.architectures.as_deref())
    }
}

/// `tokscope job`: run a named SQL job.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The job: eos, latency, cost, kv_cache, report, jitter, jitter_requests,
    /// confidence, eos_logprob, replay, mediation.
    pub name: String,
    /// A job parameter, `name=value` (repeatable), e.g. `--param low_logprob=-1.5` for `confidence`.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    pub data: String,
    #[command(flatten)]
    pub udf: UdfArgs,
    /// Result format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Write the result to this file instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

fn parse_param(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

/// `tokscope sql`: an interactive SQL shell over a dataset.
#[derive(Debug, Clone, clap::Args)]
pub struct SqlArgs {
    /// The dataset (local directory or object-store URL).
    #[arg(long)]
    pub data: String,
    #[command(flatten)]
    pub udf: UdfArgs,
    /// Result format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
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
}

/// A session with `data`'s tables and the UDFs configured by `udf`.
pub async fn session(data: &str, udf: &UdfConfig) -> Result<SessionContext> {
    let ctx = engine::new_session()?;
    engine::register_dataset_with(&ctx, &DatasetRoot::parse(data)?, udf).await?;
    Ok(ctx)
}

/// Runs `tokscope job`.
pub fn run_job(args: &JobArgs) -> Result<()> {
    export::check_destination(args.format, args.output.as_deref())?;
    let job = super::job(&args.name)?;
    let udf = args.udf.config()?;
    let batches = engine::runtime()?.block_on(async {
        let ctx = session(&args.data, &udf).await?;
        super::run_job_with(&ctx, job, &args.params).await
    })?;
    export::write_output(&batches, args.format, args.output.as_deref())
}

const HELP: &str = "Statements end with `;` at the end of a line. Commands: \\d (tables), \\history, !N (re-run history entry N), \\q (quit).";

/// Runs `tokscope sql`: statements from stdin, results to stdout, errors to
/// stderr. Returns an error at the end when any statement failed, so a piped
/// script's exit status says whether it all ran.
pub fn run_shell(args: &SqlArgs) -> Result<()> {
    if args.format == OutputFormat::Parquet {
        return Err(Error::Config("the SQL shell prints table, csv or json; use `tokscope query --format parquet --output F`".into()));
    }
    let udf = args.udf.config()?;
    let rt = engine::runtime()?;
    let ctx = rt.block_on(session(&args.data, &udf))?;
    let history_path = if args.no_history {
        None
    } else {
        args.history.clone().or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".tokscope_history")))
    };
    let stdin = std::io::stdin();
    let mut shell = Shell { ctx, rt, format: args.format, allow_write: args.allow_write, history: Vec::new(), history_path, failed: 0 };
    shell.load_history();
    let mut input = if stdin.is_terminal() && std::io::stderr().is_terminal() {
        let mut editor = rustyline::DefaultEditor::new().map_err(|e| Error::Config(format!("line editor: {e}")))?;
        for sql in &shell.history {
            // In-memory history cannot fail to take an entry; a failure only loses recall.
            let _ = editor.add_history_entry(sql.as_str());
        }
        eprintln!("tokscope sql over {}. {HELP}", args.data);
        Input::Editor(editor)
    } else {
        Input::Piped(stdin.lock().lines())
    };
    shell.run(&mut input)?;
    match shell.failed {
        0 => Ok(()),
        n => Err(Error::Config(format!("{n} statement(s) failed"))),
    }
}

/// Where the shell's lines come from: a terminal, through rustyline (line
/// editing, up-arrow recall of earlier statements, Ctrl-C to drop the
/// statement being typed, Ctrl-D to quit), or a pipe, read as it is.
enum Input<R> {
    Editor(rustyline::DefaultEditor),
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
    fn next_line(&mut self, continued: bool) -> Result<Line> {
        match self {
            Input::Piped(lines) => match lines.next() {
                Some(line) => Ok(Line::Text(line.map_err(|e| Error::io("stdin", e))?)),
                None => Ok(Line::End),
            },
            Input::Editor(editor) => match editor.readline(if continued { "     -> " } else { "tokscope> " }) {
                Ok(line) => Ok(Line::Text(line)),
                Err(rustyline::error::ReadlineError::Interrupted) => Ok(Line::Cancel),
                Err(rustyline::error::ReadlineError::Eof) => Ok(Line::End),
                Err(e) => Err(Error::Config(format!("line editor: {e}"))),
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

struct Shell {
    ctx: SessionContext,
    rt: tokio::runtime::Runtime,
    format: OutputFormat,
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
            let appended = std::fs::OpenOptions::new().create(true).append(true).open(p).and_then(|mut f| writeln!(f, "{one_line}"));
            if let Err(e) = appended {
                eprintln!("warning: history file {}: {e}", p.display());
            }
        }
        input.recall(&one_line);
        self.history.push(one_line);
    }

    fn run<R: BufRead>(&mut self, input: &mut Input<R>) -> Result<()> {
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
                    _ if t.starts_with('!') => match t[1..].parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| self.history.get(i)) {
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

    fn execute(&mut self, sql: &str) {
        let result = self.rt.block_on(engine::run_sql(&self.ctx, sql, self.allow_write)).and_then(|batches| {
            let mut out = std::io::stdout().lock();
            export::write_batches(&batches, self.format, &mut out)?;
            out.flush().map_err(|e| Error::io("stdout", e))
        });
        if let Err(e) = result {
            eprintln!("error: {e}");
            self.failed += 1;
        }
    }
}
