@_exported import RTMLocalPostgres

/// The tests' name for the throwaway PostgreSQL server (`RTMLocalPostgres`).
public typealias PostgresTestServer = LocalPostgres
/// The tests' name for its errors.
public typealias PostgresTestServerError = LocalPostgresError
