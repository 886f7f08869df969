//! `tokscope serve`: an Arrow Flight SQL endpoint over one opened dataset, so
//! notebooks and BI tools (ADBC, JDBC, Grafana) run read-only SQL with
//! tokscope's tables and functions. Queries go through [`engine::plan_sql`]
//! and [`engine::run_plan`], the CLI's read-only path; [`auth`] checks every
//! call before a handler sees it.

pub mod auth;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::sql::{
    Any, CommandGetCatalogs, CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandStatementQuery, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket};
use datafusion::logical_expr::TableType;
use datafusion::prelude::SessionContext;
use futures::{Stream, TryStreamExt};
use prost::Message;
use tonic::{Request, Response, Status, Streaming};

use crate::engine;
use crate::error::Result;
pub use auth::{Access, Token};

/// How `tokscope serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Who may call.
    pub access: Access,
    /// One line per query on stderr (rows, seconds; never the query text).
    pub log_queries: bool,
}

/// Binds `listen` (port 0: any free port) and returns the bound address with
/// the server to run on it: the caller can say where it listens first.
pub async fn bind(
    ctx: SessionContext,
    listen: SocketAddr,
    options: ServeOptions,
) -> Result<(SocketAddr, impl std::future::Future<Output = Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| crate::Error::io(format!("listening on {listen}"), e))?;
    let bound = listener.local_addr().map_err(|e| crate::Error::io(format!("listening on {listen}"), e))?;
    let access = options.access.clone();
    let service = FlightServiceServer::with_interceptor(DatasetService::new(ctx, options)?, move |r| access.check(r));
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let serving = async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .map_err(|e| config_err!("the Flight SQL server stopped: {e}"))
    };
    Ok((bound, serving))
}

/// The Flight SQL service over one session.
struct DatasetService {
    ctx: SessionContext,
    options: ServeOptions,
    sql_info: Arc<SqlInfoData>,
}

impl DatasetService {
    fn new(ctx: SessionContext, options: ServeOptions) -> Result<Self> {
        let mut info = SqlInfoDataBuilder::new();
        info.append(SqlInfo::FlightSqlServerName, "tokscope");
        info.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        // The Arrow IPC format version (Schema.fbs's MetadataVersion V5).
        info.append(SqlInfo::FlightSqlServerArrowVersion, "1.5");
        info.append(SqlInfo::FlightSqlServerReadOnly, true);
        info.append(SqlInfo::FlightSqlServerSql, true);
        info.append(SqlInfo::FlightSqlServerSubstrait, false);
        info.append(SqlInfo::FlightSqlServerTransaction, 0i32);
        info.append(SqlInfo::FlightSqlServerCancel, false);
        let sql_info = Arc::new(info.build().map_err(|e| internal_err!("server information: {e}"))?);
        Ok(DatasetService { ctx, options, sql_info })
    }

    /// Every table of the session: catalog, schema, name, type, and the
    /// schema its rows have as results.
    async fn tables(&self) -> Vec<(String, String, String, &'static str, SchemaRef)> {
        let mut tables = Vec::new();
        for catalog_name in self.ctx.catalog_names() {
            let Some(catalog) = self.ctx.catalog(&catalog_name) else { continue };
            for schema_name in catalog.schema_names() {
                let Some(schema) = catalog.schema(&schema_name) else { continue };
                let mut names = schema.table_names();
                names.sort();
                for name in names {
                    // A table the dataset lacks (written by another command) is not listed.
                    let Ok(Some(table)) = schema.table(&name).await else { continue };
                    let kind = match table.table_type() {
                        TableType::Base => "TABLE",
                        TableType::View => "VIEW",
                        TableType::Temporary => "LOCAL TEMPORARY",
                    };
                    let columns = engine::plain_schema(&table.schema());
                    tables.push((catalog_name.clone(), schema_name.clone(), name, kind, columns));
                }
            }
        }
        tables
    }

    fn info(&self, command: impl ProstMessageExt, schema: &Schema, descriptor: FlightDescriptor) -> Result<FlightInfo> {
        let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(command.as_any().encode_to_vec()));
        Ok(FlightInfo::new().try_with_schema(schema)?.with_endpoint(endpoint).with_descriptor(descriptor))
    }
}

type DoGetStream = <DatasetService as FlightService>::DoGetStream;

/// The batches as a Flight data stream (the schema first, even with no rows).
fn send(schema: SchemaRef, batches: Vec<RecordBatch>) -> Response<DoGetStream> {
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::iter(batches.into_iter().map(Ok)))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

/// A library error as the client sees it: the SQL's own problems (a
/// refused write, an unknown column) as invalid arguments.
fn status(e: crate::Error) -> Status {
    match e {
        crate::Error::Sql(_) | crate::Error::Config(_) | crate::Error::NotFound { .. } => {
            Status::invalid_argument(e.to_string())
        }
        _ => Status::internal(e.to_string()),
    }
}

#[tonic::async_trait]
impl FlightSqlService for DatasetService {
    type FlightService = DatasetService;

    /// Basic-auth clients (the interceptor has checked the password) get
    /// the bearer header that authorizes their later calls.
    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<
        Response<Pin<Box<dyn Stream<Item = std::result::Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let reply = HandshakeResponse { protocol_version: 0, payload: Default::default() };
        let mut response: Response<Pin<Box<dyn Stream<Item = _> + Send>>> =
            Response::new(Box::pin(futures::stream::iter([Ok(reply)])));
        if let Access::Token(token) = &self.options.access {
            let bearer = token.bearer().parse().map_err(|_| Status::internal("token is not a valid header"))?;
            response.metadata_mut().insert("authorization", bearer);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        // Planned now, so a refused or wrong query fails here, with its schema for the client.
        let plan = engine::plan_sql(&self.ctx, &query.query, false).await.map_err(status)?;
        let schema = engine::plain_schema(&plan.schema());
        let ticket = TicketStatementQuery { statement_handle: query.query.into_bytes().into() };
        let info = self.info(ticket, &schema, request.into_inner()).map_err(status)?;
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let sql = std::str::from_utf8(&ticket.statement_handle)
            .map_err(|_| Status::invalid_argument("the ticket is not a query this server issued"))?;
        let start = Instant::now();
        let plan = engine::plan_sql(&self.ctx, sql, false).await.map_err(status)?;
        let schema = engine::plain_schema(&plan.schema());
        let batches = engine::run_plan(&self.ctx, plan).await.map_err(status)?;
        if self.options.log_queries {
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            eprintln!("serve: query answered, {rows} rows in {:.3} s", start.elapsed().as_secs_f64());
        }
        Ok(send(schema, batches))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Ok(Response::new(self.info(query, &schema, request.into_inner()).map_err(status)?))
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        let mut names = self.ctx.catalog_names();
        names.sort();
        for name in names {
            builder.append(name);
        }
        let schema = builder.schema();
        Ok(send(schema, vec![builder.build().map_err(Status::from)?]))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Ok(Response::new(self.info(query, &schema, request.into_inner()).map_err(status)?))
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        let mut names = self.ctx.catalog_names();
        names.sort();
        for catalog_name in names {
            let Some(catalog) = self.ctx.catalog(&catalog_name) else { continue };
            let mut schemas = catalog.schema_names();
            schemas.sort();
            for schema_name in schemas {
                builder.append(&catalog_name, schema_name);
            }
        }
        let schema = builder.schema();
        Ok(send(schema, vec![builder.build().map_err(Status::from)?]))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Ok(Response::new(self.info(query, &schema, request.into_inner()).map_err(status)?))
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        // The builder applies the command's filters (catalog, patterns, types).
        let mut builder = query.into_builder();
        for (catalog, schema, name, kind, columns) in self.tables().await {
            builder.append(catalog, schema, name, kind, &columns).map_err(Status::from)?;
        }
        let schema = builder.schema();
        Ok(send(schema, vec![builder.build().map_err(Status::from)?]))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Ok(Response::new(self.info(query, &schema, request.into_inner()).map_err(status)?))
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let mut builder = query.into_builder();
        for kind in ["LOCAL TEMPORARY", "TABLE", "VIEW"] {
            builder.append(kind);
        }
        let schema = builder.schema();
        Ok(send(schema, vec![builder.build().map_err(Status::from)?]))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.sql_info).schema();
        Ok(Response::new(self.info(query, &schema, request.into_inner()).map_err(status)?))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        let builder = query.into_builder(&self.sql_info);
        let schema = builder.schema();
        Ok(send(schema, vec![builder.build().map_err(Status::from)?]))
    }

    async fn do_get_fallback(
        &self,
        _request: Request<arrow_flight::Ticket>,
        message: Any,
    ) -> std::result::Result<Response<DoGetStream>, Status> {
        Err(Status::unimplemented(format!("tokscope serve does not answer {}", message.type_url)))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
