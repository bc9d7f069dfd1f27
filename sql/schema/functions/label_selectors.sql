-- ---------------------------------------------------------------------
-- Label selectors in SQL (src/functions/label_selector.c): whether an
-- object's labels are selected by a selector as kubectl -l writes it, by
-- a metav1 LabelSelector (a Deployment's spec.selector, a NetworkPolicy's
-- podSelector), or by a Service's spec.selector map.  A constant selector's
-- equalities become labels @> '{...}', which the mirror tables' GIN index
-- on labels (jsonb_path_ops) serves (the planner support function).
-- ---------------------------------------------------------------------

-- _matches_labels_support(internal) -> internal: the planner support
-- function of both matches_labels (SupportRequestSimplify: a constant
-- selector's equalities -> labels @> '<them>'::jsonb AND the rest).
CREATE OR REPLACE FUNCTION kwatch._matches_labels_support(internal) RETURNS internal
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_matches_labels_support';

-- matches_labels(labels, selector text) -> boolean: kubectl get -l
-- selector's choice (apimachinery pkg/labels/selector.go Parse, Matches):
-- k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k, k>n, k<n, joined by
-- commas; != and notin match an object without the key; '' matches
-- everything.  ERROR 22023 on an invalid selector (apimachinery's message;
-- DETAIL: the character) when it is a constant or a parameter; one
-- computed from a row selects nothing, so that the function is LEAKPROOF
-- (an index qual under row-level security, where the call is not
-- rewritten into @>: doc/security.md, "Rows that follow RBAC").
CREATE OR REPLACE FUNCTION kwatch.matches_labels(labels jsonb, selector text) RETURNS boolean
    LANGUAGE c IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE
    SUPPORT kwatch._matches_labels_support
    AS 'MODULE_PATHNAME', 'kwatch_matches_labels';

-- matches_labels(labels, selector jsonb) -> boolean: the same for a metav1
-- LabelSelector (pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector):
-- matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist).
-- '{}' matches everything; a NULL or JSON null selector nothing (false);
-- NULL labels give NULL.  ERROR 22023 on an invalid selector, as above.
CREATE OR REPLACE FUNCTION kwatch.matches_labels(labels jsonb, selector jsonb) RETURNS boolean
    LANGUAGE c IMMUTABLE LEAKPROOF PARALLEL SAFE
    SUPPORT kwatch._matches_labels_support
    AS 'MODULE_PATHNAME', 'kwatch_matches_label_selector';

-- matches_service_selector(labels, selector jsonb) -> boolean: whether a
-- Service whose spec.selector is `selector` (a map of label keys to
-- values, all of them equalities: labels.Set(...).AsSelectorPreValidated)
-- selects a pod with these labels.  A Service without a selector (NULL,
-- JSON null, or {}, which the API server stores as no selector) selects
-- nothing, as the endpoints controller does (pkg/controller/endpoint/
-- endpoints_controller.go syncService: "services without a selector
-- receive no endpoints from this controller").  A SQL function that
-- PostgreSQL inlines: a constant selector is labels @> selector (GIN).  A
-- SQL-standard body (bound when made, its operators pg_catalog's), so that
-- the caller's search_path (an operator @> of its own schema) cannot
-- change what it returns, in a query or in an index expression.
CREATE OR REPLACE FUNCTION kwatch.matches_service_selector(labels jsonb, selector jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN pg_catalog.jsonb_typeof(selector) OPERATOR(pg_catalog.=) 'object'
                     AND selector OPERATOR(pg_catalog.<>) '{}'::jsonb
                THEN labels OPERATOR(pg_catalog.@>) selector ELSE false END;

-- _label_selector_equalities(selector text | jsonb) -> jsonb: a selector's
-- equalities as labels @> takes them ('{}' when none; NULL for a JSON null
-- LabelSelector): the index condition _matches_labels_support gives a
-- selector that is not a constant (a join's, a parameter).  ERROR 22023 on
-- an invalid selector.
CREATE OR REPLACE FUNCTION kwatch._label_selector_equalities(selector text) RETURNS jsonb
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_label_selector_equalities';
CREATE OR REPLACE FUNCTION kwatch._label_selector_equalities(selector jsonb) RETURNS jsonb
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'kwatch_label_selector_equalities';
