# kwatch: PGXS build.  `make demo` and `make test` are the two entry points
# documented in README.md; everything else is the usual PGXS targets.

EXTENSION  = kwatch
MODULE_big = kwatch
OBJS = \
	src/kwatch.o \
	src/common/guc.o \
	src/common/shmem.o \
	src/transfer/worker.o \
	src/cluster/cluster_config.o \
	src/cluster/http.o \
	src/cluster/credential.o \
	src/decode/decode.o \
	src/decode/redact.o \
	src/decode/yaml_manifest.o \
	src/functions/column_functions.o \
	src/transfer/watch.o \
	src/transfer/watch_apply.o \
	src/transfer/watch_result.o \
	src/transfer/watch_status.o \
	src/transfer/list_strategy.o \
	src/common/transaction.o \
	src/apply/as_owner.o \
	src/functions/owner_functions.o \
	src/channel/known_rows.o \
	src/apply/sync.o \
	src/apply/sync_plans.o \
	src/apply/sync_events.o \
	src/apply/stage_table.o \
	src/apply/relist_stage.o \
	src/apply/merge.o \
	src/apply/copy_rows.o \
	src/apply/history.o \
	src/channel/apply_message.o \
	src/apply/apply_execute.o \
	src/channel/apply_pool.o \
	src/apply/apply_worker.o \
	src/apply/notify.o \
	src/common/catalog.o \
	src/common/schema_version.o \
	src/common/json.o \
	src/common/yaml_error.o \
	src/common/caller.o \
	src/functions/sync_wait.o \
	src/functions/wait_current.o \
	src/functions/status.o \
	src/functions/ownership.o \
	src/functions/relation_guard.o \
	src/functions/import_servers.o \
	src/functions/privileged.o \
	src/cluster/discovery.o \
	src/cluster/kubeconfig.o \
	src/cluster/fdw_option.o \
	src/cluster/connection.o \
	src/apply/events.o \
	src/live/events_deparse.o \
	src/live/events_fdw.o \
	src/live/live_column.o \
	src/live/live_table.o \
	src/live/fdw_modify.o \
	src/live/fdw_deparse.o \
	src/live/live_scan.o \
	src/live/fdw.o \
	src/cluster/write.o \
	src/functions/apply.o \
	src/functions/apply_manifest.o \
	src/functions/label_selector.o \
	src/functions/rbac_rows.o \
	src/sender/sender.o

# The extension scripts.  The install script of the current version and the
# update scripts of sql/updates/*.sql.in are generated (DATA_built, in the
# build directory) by sql/build.sh from the sources under sql/schema/, in
# the order sql/schema/ORDER gives (doc/development.md, "SQL sources").
# DATA: the released scripts, kept byte for byte as they shipped
# (installations update through them; CREATE EXTENSION ... VERSION '0.1.0'
# too), relative to $(srcdir), which PGXS sets to the source tree in a
# VPATH build (pg_buildext builds in build-<version>/).  No script is added
# to this list any more: a new version's update is a template in
# sql/updates/.  Recursive variables: KWATCH_VERSION is set below.
KW_UPDATE_TEMPLATES = $(notdir $(wildcard $(KWATCH_SOURCE_DIR)sql/updates/kwatch--*.sql.in))
KW_UPDATES_BUILT = $(addprefix sql/,$(KW_UPDATE_TEMPLATES:.in=))
KW_INSTALL_BUILT = sql/kwatch--$(KWATCH_VERSION).sql
DATA_built = $(KW_INSTALL_BUILT) $(KW_UPDATES_BUILT)
DATA = $(addprefix sql/kwatch--,$(addsuffix .sql,0.1.0 0.1.0--0.2.0 0.2.0--0.3.0 \
         0.3.0--0.4.0 0.4.0--0.5.0 0.5.0--0.6.0 0.6.0--0.7.0))

# pg_regress suites (test/sql/<name>.sql, test/expected/<name>.out, as
# pgvector lays them out); run by test/drivers/run.sh
# against a temporary instance that preloads kwatch (test/regress.conf).
REGRESS = options kubeconfig registration names events live relations upgrade yaml_manifest label_selectors rbac_rows
REGRESS_OPTS = --inputdir=test --temp-config=test/regress.conf

# The extension's version is written once, in kwatch.control's
# default_version; the library gets it as KWATCH_VERSION (the User-Agent,
# http.c).  Read from the directory of this Makefile, so that a VPATH build
# (pg_buildext runs `make -f <source>/Makefile` in build-<version>/) finds it
# before PGXS has set $(srcdir).
KWATCH_SOURCE_DIR := $(dir $(firstword $(MAKEFILE_LIST)))
KWATCH_VERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(KWATCH_SOURCE_DIR)kwatch.control)
ifeq ($(KWATCH_VERSION),)
$(error kwatch: no default_version = '...' in $(KWATCH_SOURCE_DIR)kwatch.control)
endif

PG_CONFIG ?= pg_config
PKG_DEPS  = libcurl json-c yaml-0.1
# src/ has a folder per process and layer (src/README.md); a source names
# a header by its file name, found through one include path per folder.
KW_FOLDERS  = common cluster decode transfer channel apply live functions sender
PG_CPPFLAGS = $(addprefix -I$(srcdir)/src/,$(KW_FOLDERS)) \
              $(shell pkg-config --cflags $(PKG_DEPS)) \
              -DKWATCH_VERSION='"$(KWATCH_VERSION)"'
SHLIB_LINK  = $(shell pkg-config --libs $(PKG_DEPS))
# -Wno-clobbered: -Wextra's clobber check misfires inside PostgreSQL's own
# PG_TRY macro (elog.h's _do_rethrow); variables that must survive a longjmp
# are declared volatile by hand.
PG_CFLAGS   = -Wall -Wextra -Werror -Wno-unused-parameter \
              -Wno-missing-field-initializers -Wno-sign-compare -Wno-clobbered

PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
# PGXS tracks no header dependencies (without --enable-depend): a changed
# struct in the shared header must rebuild every object.
$(OBJS): $(wildcard $(srcdir)/src/*/kw_*.h) $(srcdir)/src/common/pg_compat.h
# The version is compiled in (KWATCH_VERSION, used by http.c and
# schema_version.c): a new
# default_version must rebuild what uses it.
src/cluster/http.o src/common/schema_version.o: $(srcdir)/kwatch.control
# A VPATH build writes its objects under the build directory's src/<folder>/,
# which must exist first (absolute paths, so that VPATH does not find the
# source tree's folders instead).
KW_OBJ_DIRS = $(CURDIR)/src $(addprefix $(CURDIR)/src/,$(KW_FOLDERS))
$(OBJS): | $(KW_OBJ_DIRS)
$(KW_OBJ_DIRS):
	mkdir -p $@
# The generated scripts (DATA_built above).  Each depends on every source
# (an update may include any of them) and on the script that writes it.
KW_SQL_SOURCES = $(srcdir)/sql/build.sh $(srcdir)/sql/schema/ORDER \
                 $(wildcard $(srcdir)/sql/schema/*.sql $(srcdir)/sql/schema/*/*.sql)
$(KW_INSTALL_BUILT): $(KW_SQL_SOURCES) $(srcdir)/kwatch.control | $(CURDIR)/sql
	sh $(srcdir)/sql/build.sh install $(srcdir)/sql $(KWATCH_VERSION) > $@.tmp
	mv $@.tmp $@
$(KW_UPDATES_BUILT): sql/%.sql: $(srcdir)/sql/updates/%.sql.in $(KW_SQL_SOURCES) | $(CURDIR)/sql
	sh $(srcdir)/sql/build.sh update $(srcdir)/sql $< > $@.tmp
	mv $@.tmp $@
$(CURDIR)/sql:
	mkdir -p $@
else
# A fresh machine has no server headers yet: `make test` and `make demo`
# install them (test/packaging/install-deps.sh); plain `make` says how.
all install installcheck:
	@echo "kwatch: PostgreSQL server headers are missing; run 'make deps' first" >&2; exit 1
endif

.PHONY: deps test test-versions deb demo demo-stop bench print-regress print-scripts soak bench-recovery bench-fleet bench-rbac

print-regress:
	@echo $(REGRESS)

# The file names of the extension scripts `make install` installs
# (test/packaging/package.sh checks that the package holds each).
print-scripts:
	@echo $(notdir $(DATA) $(DATA_built))

# Installs build and test dependencies from Debian's archive when missing.
deps:
	@bash test/packaging/install-deps.sh

# The test command (README): deps, build, install, pg_regress, integration
# tests against a real control plane.
test:
	@bash test/drivers/run.sh

# PostgreSQL 17 and 18 (README, "Supported PostgreSQL versions"): a Debian
# 13 and an unstable chroot (debootstrap, cached in /var/cache/kwatch-pg),
# kwatch built, packaged and tested in each: pg_regress and the worker's
# integration tests.  `make test` runs it last; VERSIONS="17" for one.
test-versions:
	@bash test/versions/run.sh $(VERSIONS)

# The Debian package postgresql-15-kwatch (README), built by
# dpkg-buildpackage from a copy of the work tree, never in it, into DEB_DIR
# (default: the parent directory, as dpkg-buildpackage does).
DEB_DIR ?= ..
deb:
	@bash test/packaging/deb.sh '$(DEB_DIR)'

# The demo (README): a throwaway PostgreSQL + control plane, left running.
# `make demo KUBECONFIG=~/.kube/config` mirrors your cluster instead of a
# local one; a KUBECONFIG merely present in the environment is not used.
demo:
	@KWATCH_DEMO_KUBECONFIG='$(if $(filter command line,$(origin KUBECONFIG)),$(KUBECONFIG))' bash test/demo/demo.sh start

demo-stop:
	@bash test/demo/demo.sh stop

bench:
	@PODS=$(PODS) SCALE_CRDS=$(SCALE_CRDS) WATCHES=$(WATCHES) bash test/bench/run.sh

# Fault soak (issue 3): the convergence test for MINUTES (default 30) at a
# high rate with faults; prints rows, changes, faults, mismatches, memory.
soak:
	@MINUTES=$(MINUTES) bash test/bench/soak.sh

# The fleet report (issue 47, test/bench/fleet.py): WATCHES (default
# 100,300,1000) watches over servers of 4 resources each, on a 1.20 API
# server of its own reached through a loopback address per server.
bench-fleet:
	@WATCHES=$(WATCHES) bash test/bench/fleet.sh

# What rows that follow RBAC cost a reader (test/bench/rbac_rows.py):
# RBAC_ROWS (default 50000) pods over 500 namespaces, on a 1.20 API server
# of its own with RBAC authorization; also the last part of `make bench`.
bench-rbac:
	@RBAC_ROWS=$(RBAC_ROWS) bash test/bench/rbac_rows.sh

# Recovery timings (issue 3): API server back -> table converged, stalled
# connection noticed, relist after a 410 on OBJECTS (default 10000) objects.
bench-recovery:
	@OBJECTS=$(OBJECTS) bash test/bench/recovery.sh
