-- pgconsole's EXPLAIN helper (optional): plans of the statements that the monitoring role may not read or write
-- itself, DML included, without giving it those privileges. Run it as a superuser in each database whose
-- statements are planned (psql -d app -f explain_helper.sql); run it again to update it.
--
-- What the monitoring role may plan through it is what its owner, pgconsole_explainer, may read and write. The
-- owner logs in nowhere and is never a superuser (the helper refuses to run otherwise); the helper plans one
-- statement, never runs it (EXPLAIN without ANALYZE), and only in a read-only transaction, where nothing the
-- planner calls can write either. Anything else is refused with its reason. docs/monitoring-role.md says more.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgconsole_explainer') THEN
        CREATE ROLE pgconsole_explainer NOLOGIN;
    END IF;
    IF current_setting('server_version_num')::int >= 140000 THEN
        GRANT pg_read_all_data, pg_write_all_data TO pgconsole_explainer;  -- planning a DML needs its privilege
    ELSE
        -- PostgreSQL 13: the tables of this database as they are now (grant again for tables made later).
        DECLARE
            s name;
        BEGIN
            FOR s IN SELECT nspname FROM pg_namespace
                     WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' LOOP
                EXECUTE format('GRANT USAGE ON SCHEMA %I TO pgconsole_explainer', s);
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I '
                               'TO pgconsole_explainer', s);
            END LOOP;
        END;
    END IF;
END
$$;

CREATE SCHEMA IF NOT EXISTS pgconsole;
-- A schema of that name that a user made first would let that user replace the function: refused.
DO $$
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
            WHERE n.nspname = 'pgconsole') THEN
        RAISE EXCEPTION 'schema pgconsole is not owned by a superuser: drop it, or give it to one, first';
    END IF;
END
$$;
REVOKE ALL ON SCHEMA pgconsole FROM PUBLIC;

-- statement: the text as pg_stat_statements keeps it ($1 for constants); role_search_path: the search path of the
-- statement's role, so that names resolve as they did for the application. Returns EXPLAIN (FORMAT JSON)'s one
-- plan: the generic plan of the statement prepared with parameters of unknown type, EXPLAIN EXECUTE with NULLs
-- under plan_cache_mode = force_generic_plan.
CREATE OR REPLACE FUNCTION pgconsole.explain_generic(statement text, role_search_path text) RETURNS json
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    plan json;
    parameters int;
    prepared text := 'pgconsole_explain_generic';
    prepare_sql text;
    explain_sql text;
    deallocate_sql text;
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       OR pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER')
       OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER')
       OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') THEN
        RAISE EXCEPTION 'pgconsole.explain_generic is owned by a superuser or a role that reaches the server''s '
                        'files or programs (%): it refuses to run', current_user
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'ALTER FUNCTION pgconsole.explain_generic(text, text) OWNER TO pgconsole_explainer';
    END IF;
    IF current_setting('transaction_read_only') <> 'on' THEN
        RAISE EXCEPTION 'pgconsole.explain_generic plans only in a read-only transaction'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    -- One statement: EXECUTE would run each of several (a semicolon inside a quoted name is refused too).
    IF position(';' IN rtrim(statement, E' \t\r\n;')) > 0 THEN
        RAISE EXCEPTION 'pgconsole.explain_generic plans one statement: the text holds a semicolon'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- Everything this function evaluates is evaluated here, under its own search path: once the statement's role's
    -- path is in effect, a function, operator or type that an expression names could be one a user planted in a
    -- schema of that path. After it, the function only runs the statements made here.
    SELECT coalesce(max(m[1]::int), 0) INTO parameters FROM regexp_matches(statement, '\$([0-9]+)', 'g') AS m;
    prepare_sql := format('PREPARE %I AS ', prepared) || statement;
    explain_sql := format('EXPLAIN (FORMAT JSON) EXECUTE %I', prepared)
        || CASE WHEN parameters > 0
                THEN '(' || array_to_string(array_fill('NULL'::text, ARRAY[parameters]), ', ') || ')'
                ELSE '' END;
    deallocate_sql := format('DEALLOCATE %I', prepared);
    -- A prepared statement outlives its transaction: one left by a call cancelled at its timeout goes first.
    IF EXISTS (SELECT FROM pg_prepared_statements WHERE name = prepared) THEN
        EXECUTE deallocate_sql;
    END IF;
    PERFORM set_config('search_path', role_search_path, true);
    EXECUTE prepare_sql;
    BEGIN
        EXECUTE explain_sql INTO plan;
    EXCEPTION WHEN query_canceled OR OTHERS THEN
        EXECUTE deallocate_sql;
        RAISE;
    END;
    EXECUTE deallocate_sql;
    RETURN plan;
END
$fn$;

ALTER FUNCTION pgconsole.explain_generic(text, text) OWNER TO pgconsole_explainer;
REVOKE ALL ON FUNCTION pgconsole.explain_generic(text, text) FROM PUBLIC;
GRANT USAGE ON SCHEMA pgconsole TO pgconsole_monitor;
GRANT EXECUTE ON FUNCTION pgconsole.explain_generic(text, text) TO pgconsole_monitor;
