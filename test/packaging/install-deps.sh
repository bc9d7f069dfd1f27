#!/usr/bin/env bash
# Installs what kwatch needs to build, package (debian/control's
# Build-Depends) and test from Debian's archive, only when something is
# missing.  Safe to run repeatedly.  Needs root (or sudo).
set -euo pipefail
pkgs=(postgresql-server-dev-15 libcurl4-openssl-dev libjson-c-dev libyaml-dev
      pkg-config make gcc python3-psycopg2 python3-pytest python3-pytest-random-order python3-prometheus-client python3-yaml openssl curl
      golang-1.19-go etcd-server etcd-client dpkg-dev
      build-essential debhelper postgresql-server-dev-all
      debootstrap)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "[deps] installing: ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "[deps] done"
