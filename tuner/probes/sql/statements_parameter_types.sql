-- The parameter types PostgreSQL inferred for a statement prepared in this session ($1: its name).
SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = $1
