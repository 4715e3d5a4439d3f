{{- /*
Who may do what, said once for every function file.

run_as_owner makes a money function run as its owner (SECURITY DEFINER) with a pinned search_path,
the schema first and pg_temp last, so that a caller cannot shadow a table with a temporary one of
the same name and steer the owner's writes. The service's role jobbill_app holds SELECT on the
tables and no write grant at all: these functions are the only door through which money moves.

service_may_call lets jobbill_app, and nobody else, call a function: pass its signature as "fn".
*/ -}}
{{- define "run_as_owner" }}SECURITY DEFINER SET search_path = {{ .schema }}, pg_temp{{ end -}}
{{- define "service_may_call" }}
REVOKE ALL ON FUNCTION {{ .fn }} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {{ .fn }} TO jobbill_app;
{{ end -}}
{{- define "nobody_may_call" }}
REVOKE ALL ON FUNCTION {{ .fn }} FROM PUBLIC;
{{ end -}}
