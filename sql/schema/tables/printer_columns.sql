-- printer_columns: the printer columns of the custom resources watched so
-- far (the columns `kubectl get` shows for a CRD: its version's
-- additionalPrinterColumns), as column definitions in the form
-- typed_columns() gives them; `skipped` says which printer columns could
-- not be expressed, and why.  They become generated columns of the mirror
-- table, and of live tables of it.
CREATE TABLE kwatch.printer_columns (
    api_group   text NOT NULL,
    plural      text NOT NULL,
    api_version text NOT NULL,
    columns     text[] NOT NULL,
    skipped     text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (api_group, plural)
);
SELECT pg_catalog.pg_extension_config_dump('kwatch.printer_columns', '');
GRANT SELECT ON kwatch.printer_columns TO PUBLIC;
