/*-------------------------------------------------------------------------
 *
 * yaml_error.c
 *		What libyaml says about a parse that failed, as an errdetail, for
 *		both readers of YAML: kubeconfig files (cluster/kubeconfig.c) and
 *		manifests (decode/yaml_manifest.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <yaml.h>

#include "kw_common.h"

/*
 * kw_errdetail_yaml_context: inside an ereport() of a failed
 * yaml_parser_parse/yaml_parser_load of `parser`, the errdetail naming the
 * construct libyaml was reading (parser->context, "while parsing a block
 * mapping") and where it started (1-based line and column), or nothing
 * when libyaml gave no context.  Returns 0, as errdetail does, the shape
 * of PostgreSQL's errdetail_relkind_not_supported (catalog/pg_class.c).
 */
int
kw_errdetail_yaml_context(const struct yaml_parser_s *parser)
{
	if (parser->context == NULL)
		return 0;
	return errdetail("The error occurred %s, which started at line %lu, column %lu.",
					 parser->context,
					 (unsigned long) parser->context_mark.line + 1,
					 (unsigned long) parser->context_mark.column + 1);
}
