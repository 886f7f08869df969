//! Budgets and alerts of the scheduled run (`[[budgets]]`, `[[alerts]]` and
//! `on_alert` in the run file): after the ingest, every rule is evaluated
//! over the dataset through the jobs (a threshold reads a job's column, a
//! budget the `daily` job's `cost_usd`), giving the breaches active now.
//! [`state`] keeps which of them were already notified, so that a breach
//! fires once; [`notify`] hands the fired ones to the user's command.

pub mod notify;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, Float64Array, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use chrono::{Datelike, NaiveDate};
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::jobs;

/// A value in `where` or `params`: text, a number or a boolean.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A string.
    Text(String),
    /// A number (TOML integers too).
    Number(f64),
    /// `true` or `false`.
    Flag(bool),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Text(s) => f.write_str(s),
            Value::Number(n) => write!(f, "{n}"),
            Value::Flag(b) => write!(f, "{b}"),
        }
    }
}

/// `[[alerts]]`: a threshold on a column of a job's result.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRule {
    /// The rule's name (default: `<job>.<column> above|below <threshold>`,
    /// with its `where` and `params`).
    pub name: Option<String>,
    /// The job whose result is read.
    pub job: String,
    /// The numeric column compared.
    pub column: String,
    /// Fires where the value is greater than this.
    pub above: Option<f64>,
    /// Fires where the value is less than this.
    pub below: Option<f64>,
    /// Only the rows whose columns hold these values (`{ model = "gpt-4o" }`).
    #[serde(default, rename = "where")]
    pub filter: BTreeMap<String, Value>,
    /// Parameters of the job (`{ by = "team", top = 5 }`), as `--param`.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
}

/// `[[budgets]]`: USD a month for one team, user, project, API key or tag.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The budget's name (default: `team=search`).
    pub name: Option<String>,
    /// A `team`.
    pub team: Option<String>,
    /// A `user_id`.
    pub user: Option<String>,
    /// A `project`.
    pub project: Option<String>,
    /// A `key_alias`.
    pub key: Option<String>,
    /// A tag, as written (`team:search`).
    pub tag: Option<String>,
    /// USD per calendar month (UTC).
    pub usd_per_month: f64,
}

impl Budget {
    /// The grouping column (`jobs::GROUPINGS`) and the value it is for.
    fn scope(&self) -> Result<(&'static str, &str)> {
        let scopes = [
            ("team", "team", &self.team),
            ("user_id", "user", &self.user),
            ("project", "project", &self.project),
            ("key_alias", "key", &self.key),
            ("tag", "tag", &self.tag),
        ];
        let set: Vec<(&'static str, &str)> =
            scopes.iter().filter_map(|(column, _, v)| v.as_deref().map(|v| (*column, v))).collect();
        match set.as_slice() {
            [one] => Ok(*one),
            _ => Err(config_err!(
                "[[budgets]] usd_per_month = {}: name exactly one of team, user, project, key, tag",
                self.usd_per_month
            )),
        }
    }

    /// The name given, else `team=search`.
    fn name(&self) -> Result<String> {
        let (column, value) = self.scope()?;
        Ok(self.name.clone().unwrap_or_else(|| format!("{column}={value}")))
    }
}

impl AlertRule {
    /// The name given, else one made of the rule's settings.
    fn name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let mut name = format!("{}.{}", self.job, self.column);
        if let Some(above) = self.above {
            name.push_str(&format!(" above {above}"));
        }
        if let Some(below) = self.below {
            name.push_str(&format!(" below {below}"));
        }
        let pairs = |m: &BTreeMap<String, Value>| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>();
        if !self.filter.is_empty() {
            name.push_str(&format!(" where {}", pairs(&self.filter).join(", ")));
        }
        if !self.params.is_empty() {
            name.push_str(&format!(" ({})", pairs(&self.params).join(", ")));
        }
        name
    }

    /// `params` as the job's `--param` overrides.
    fn overrides(&self) -> Vec<(String, String)> {
        self.params.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
    }
}

/// Checks the rules before any work: each job exists and takes its
/// parameters, each threshold and budget is a finite number, names are
/// unique.
pub fn check(rules: &[AlertRule], budgets: &[Budget]) -> Result<()> {
    let mut names = BTreeSet::new();
    for rule in rules {
        let name = rule.name();
        let job = jobs::job(&rule.job).map_err(|e| config_err!("[[alerts]] {name}: {e}"))?;
        job.sql_with(&rule.overrides()).map_err(|e| config_err!("[[alerts]] {name}: {e}"))?;
        if rule.above.is_none() && rule.below.is_none() {
            return Err(config_err!("[[alerts]] {name}: give `above` or `below` (or both)"));
        }
        if [rule.above, rule.below].iter().flatten().any(|t| !t.is_finite()) {
            return Err(config_err!("[[alerts]] {name}: thresholds must be finite numbers"));
        }
        if !names.insert(name.clone()) {
            return Err(config_err!("[[alerts]] {name}: two rules have this name; give each its own `name`"));
        }
    }
    for budget in budgets {
        let name = budget.name()?;
        if !(budget.usd_per_month.is_finite() && budget.usd_per_month > 0.0) {
            return Err(config_err!("[[budgets]] {name}: usd_per_month must be a positive number"));
        }
        if !names.insert(name.clone()) {
            return Err(config_err!("[[budgets]] {name}: two rules have this name; give each its own `name`"));
        }
    }
    Ok(())
}

/// A breach: a rule whose threshold a row of its job crosses now, or a
/// budget whose month-to-date spend or month-end forecast is over it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Alert {
    /// Stable while the breach lasts: the rule's name and the row's keys
    /// (a budget's: its name, the month and `spend` or `forecast`).
    pub id: String,
    /// The rule's or budget's name.
    pub rule: String,
    /// `threshold` or `budget`.
    pub kind: &'static str,
    /// The job read (`daily` for budgets).
    pub job: String,
    /// The column compared (budgets: `spend_usd` or `forecast_usd`).
    pub column: String,
    /// The row's keys: its text, date and time columns (budgets: the
    /// grouping column and the month).
    pub keys: BTreeMap<String, String>,
    /// The value that crossed.
    pub value: f64,
    /// `above` or `below`.
    pub direction: &'static str,
    /// The threshold crossed (budgets: `usd_per_month`).
    pub threshold: f64,
    /// Budgets: the month's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStatus>,
    /// One line saying what crossed what (the dashboard's banner).
    pub message: String,
    /// When a run first found this breach (RFC 3339, UTC).
    pub since: String,
    /// Whether this run fires it (new, or recorded but not yet notified).
    pub fired: bool,
}

/// A budget's month so far.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct BudgetStatus {
    /// `usd_per_month`.
    pub usd_per_month: f64,
    /// Spend from the 1st of the month to the run's date, inclusive.
    pub spend_usd: f64,
    /// `spend_usd / days_elapsed * days_in_month`.
    pub forecast_usd: f64,
    /// Days of the month up to the run's date, that day included.
    pub days_elapsed: u32,
    /// Days in the month.
    pub days_in_month: u32,
}

/// Every breach active now, over the session's dataset, as of `date` (the
/// run's date: budgets count the month it falls in, up to it).
pub async fn evaluate(
    ctx: &SessionContext,
    rules: &[AlertRule],
    budgets: &[Budget],
    date: NaiveDate,
) -> Result<Vec<Alert>> {
    let mut alerts = Vec::new();
    for rule in rules {
        let rows = job_rows(ctx, &rule.job, &rule.overrides()).await?;
        alerts.extend(threshold_breaches(rule, &rows)?);
    }
    let mut by_column: BTreeMap<&'static str, Vec<&Budget>> = BTreeMap::new();
    for budget in budgets {
        by_column.entry(budget.scope()?.0).or_default().push(budget);
    }
    for (column, budgets) in by_column {
        let rows = job_rows(ctx, "daily", &[("by".to_string(), column.to_string())]).await?;
        for budget in budgets {
            alerts.extend(budget_breach(budget, &rows, date)?);
        }
    }
    Ok(alerts)
}

/// A cell of a job's result.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    /// A text, date, time or boolean column: a key of the row.
    Key(String),
    /// A numeric column.
    Number(f64),
    /// Null, or a column of another type (lists, structs).
    Other,
}

/// A job's result as named cells, in column order.
#[derive(Debug, Default)]
struct Rows {
    columns: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

impl Rows {
    fn from_batches(batches: &[RecordBatch]) -> Result<Self> {
        let Some(first) = batches.first() else { return Ok(Rows::default()) };
        let columns: Vec<String> = first.schema().fields().iter().map(|f| f.name().clone()).collect();
        let mut rows = Vec::new();
        for batch in batches {
            let mut cells: Vec<Vec<Cell>> = vec![Vec::with_capacity(columns.len()); batch.num_rows()];
            for column in batch.columns() {
                for (row, cell) in column_cells(column.as_ref())?.into_iter().enumerate() {
                    cells[row].push(cell);
                }
            }
            rows.extend(cells);
        }
        Ok(Rows { columns, rows })
    }

    fn index(&self, column: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == column)
    }
}

fn column_cells(array: &dyn Array) -> Result<Vec<Cell>> {
    let key = matches!(
        array.data_type(),
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(..)
            | DataType::Boolean
            | DataType::Dictionary(..)
    );
    if key {
        let formatter = ArrayFormatter::try_new(array, &FormatOptions::default())?;
        return Ok((0..array.len())
            .map(|i| if array.is_null(i) { Cell::Other } else { Cell::Key(formatter.value(i).to_string()) })
            .collect());
    }
    if array.data_type().is_numeric() {
        let cast = arrow::compute::cast(array, &DataType::Float64)?;
        let numbers = cast
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or_else(|| internal_err!("a cast to Float64 gave another type"))?;
        return Ok((0..numbers.len())
            .map(|i| if numbers.is_null(i) { Cell::Other } else { Cell::Number(numbers.value(i)) })
            .collect());
    }
    Ok(vec![Cell::Other; array.len()])
}

/// Runs `job` with `params`; a job whose input table holds no rows has no rows.
async fn job_rows(ctx: &SessionContext, job: &str, params: &[(String, String)]) -> Result<Rows> {
    match jobs::run_job_with(ctx, jobs::job(job)?, params).await {
        Ok(batches) => Rows::from_batches(&batches),
        Err(Error::NotFound { .. }) => Ok(Rows::default()),
        Err(e) => Err(e),
    }
}

/// The rows of `rule`'s job that its filter keeps and whose value crosses a threshold.
fn threshold_breaches(rule: &AlertRule, rows: &Rows) -> Result<Vec<Alert>> {
    let name = rule.name();
    if rows.rows.is_empty() {
        return Ok(Vec::new());
    }
    let missing = |column: &str| {
        config_err!(
            "[[alerts]] {name}: job {} has no column {column:?} (columns: {})",
            rule.job,
            rows.columns.join(", ")
        )
    };
    let value_at = rows.index(&rule.column).ok_or_else(|| missing(&rule.column))?;
    let filters: Vec<(usize, &Value)> = rule
        .filter
        .iter()
        .map(|(column, value)| rows.index(column).map(|i| (i, value)).ok_or_else(|| missing(column)))
        .collect::<Result<_>>()?;
    let mut breaches = Vec::new();
    for row in &rows.rows {
        if !filters.iter().all(|(i, wanted)| matches(&row[*i], wanted)) {
            continue;
        }
        let Cell::Number(value) = row[value_at] else { continue };
        let crossed = match (rule.above, rule.below) {
            (Some(above), _) if value > above => Some(("above", above)),
            (_, Some(below)) if value < below => Some(("below", below)),
            _ => None,
        };
        let Some((direction, threshold)) = crossed else { continue };
        let keys: Vec<(String, String)> = rows
            .columns
            .iter()
            .zip(row)
            .filter_map(|(column, cell)| match cell {
                Cell::Key(k) => Some((column.clone(), k.clone())),
                _ => None,
            })
            .collect();
        let described = keys.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
        breaches.push(Alert {
            id: format!("{name} | {described}"),
            rule: name.clone(),
            kind: "threshold",
            job: rule.job.clone(),
            column: rule.column.clone(),
            keys: keys.into_iter().collect(),
            value,
            direction,
            threshold,
            budget: None,
            message: format!(
                "{name}: {} {} is {direction} {} ({described})",
                rule.column,
                number(value),
                number(threshold)
            ),
            since: String::new(),
            fired: false,
        });
    }
    Ok(breaches)
}

/// Whether a cell holds the value a filter wants: the same text, or the same number.
fn matches(cell: &Cell, wanted: &Value) -> bool {
    match (cell, wanted) {
        (Cell::Key(k), Value::Text(w)) => k == w,
        (Cell::Key(k), Value::Flag(w)) => k == &w.to_string(),
        (Cell::Number(n), Value::Number(w)) => n == w,
        (Cell::Key(k), Value::Number(w)) => k.parse::<f64>().is_ok_and(|n| n == *w),
        _ => false,
    }
}

/// `budget`'s breach, if any, from the `daily` rows grouped by its column:
/// spend over the budget, else the month-end forecast over it.
fn budget_breach(budget: &Budget, daily: &Rows, date: NaiveDate) -> Result<Option<Alert>> {
    let (column, scope) = budget.scope()?;
    let name = budget.name()?;
    let status = month_status(budget, daily, column, scope, date)?;
    let month = date.format("%Y-%m").to_string();
    let (what, value) = if status.spend_usd > budget.usd_per_month {
        ("spend", status.spend_usd)
    } else if status.forecast_usd > budget.usd_per_month {
        ("forecast", status.forecast_usd)
    } else {
        return Ok(None);
    };
    let message = match what {
        "spend" => format!(
            "budget {name}: {month} spend {} is above {} a month (forecast {})",
            usd(status.spend_usd),
            usd(budget.usd_per_month),
            usd(status.forecast_usd)
        ),
        _ => format!(
            "budget {name}: {month} forecast {} is above {} a month ({} spent in {} of {} days)",
            usd(status.forecast_usd),
            usd(budget.usd_per_month),
            usd(status.spend_usd),
            status.days_elapsed,
            status.days_in_month
        ),
    };
    Ok(Some(Alert {
        id: format!("budget {name} | {month} | {what}"),
        rule: name,
        kind: "budget",
        job: "daily".to_string(),
        column: format!("{what}_usd"),
        keys: [(column.to_string(), scope.to_string()), ("month".to_string(), month)].into_iter().collect(),
        value,
        direction: "above",
        threshold: budget.usd_per_month,
        budget: Some(status),
        message,
        since: String::new(),
        fired: false,
    }))
}

/// The month of `date` so far for `scope` in `column`: the sum of `daily`'s
/// `cost_usd` over the days from the 1st to `date` (unpriced days add
/// nothing), and the forecast (docs/metrics.md, "Budgets").
fn month_status(budget: &Budget, daily: &Rows, column: &str, scope: &str, date: NaiveDate) -> Result<BudgetStatus> {
    let first = date.with_day(1).ok_or_else(|| internal_err!("{date} has no first day"))?;
    let days_in_month = days_in_month(date);
    let days_elapsed = date.day();
    let mut spend_usd = 0.0;
    if !daily.rows.is_empty() {
        let at = |c: &str| daily.index(c).ok_or_else(|| internal_err!("the daily job has no column {c}"));
        let (day_at, group_at, cost_at) = (at("date")?, at(column)?, at("cost_usd")?);
        for row in &daily.rows {
            let Cell::Key(day) = &row[day_at] else { continue };
            let Ok(day) = NaiveDate::parse_from_str(day, "%Y-%m-%d") else { continue };
            if day < first || day > date || row[group_at] != Cell::Key(scope.to_string()) {
                continue;
            }
            if let Cell::Number(cost) = row[cost_at] {
                spend_usd += cost;
            }
        }
    }
    Ok(BudgetStatus {
        usd_per_month: budget.usd_per_month,
        spend_usd,
        forecast_usd: spend_usd / f64::from(days_elapsed) * f64::from(days_in_month),
        days_elapsed,
        days_in_month,
    })
}

/// The number of days in `date`'s month.
fn days_in_month(date: NaiveDate) -> u32 {
    let (year, month) = if date.month() == 12 { (date.year() + 1, 1) } else { (date.year(), date.month() + 1) };
    NaiveDate::from_ymd_opt(year, month, 1).and_then(|next| next.pred_opt()).map_or(31, |last| last.day())
}

/// A value as the banner shows it: up to 4 decimals, no trailing zeros.
fn number(v: f64) -> String {
    let text = format!("{v:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// Dollars with cents.
fn usd(v: f64) -> String {
    format!("${v:.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_have_their_days() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        assert_eq!(days_in_month(d("2024-02-10")), 29);
        assert_eq!(days_in_month(d("2023-02-28")), 28);
        assert_eq!(days_in_month(d("2024-12-31")), 31);
        assert_eq!(days_in_month(d("2024-06-01")), 30);
    }

    #[test]
    fn numbers_are_shown_short() {
        assert_eq!(number(0.98), "0.98");
        assert_eq!(number(2000.0), "2000");
        assert_eq!(number(0.953_846_15), "0.9538");
        assert_eq!(usd(12.0), "$12.00");
    }

    #[test]
    fn a_budget_names_exactly_one_scope_and_names_are_unique() {
        let budget = |team: Option<&str>, tag: Option<&str>| Budget {
            name: None,
            team: team.map(str::to_string),
            user: None,
            project: None,
            key: None,
            tag: tag.map(str::to_string),
            usd_per_month: 5.0,
        };
        assert!(check(&[], &[budget(Some("a"), Some("b"))]).unwrap_err().to_string().contains("exactly one"));
        assert!(check(&[], &[budget(None, None)]).is_err());
        assert!(check(&[], &[budget(Some("a"), None), budget(Some("a"), None)]).is_err());
        assert!(check(&[], &[budget(Some("a"), None), budget(None, Some("a"))]).is_ok());
    }
}
