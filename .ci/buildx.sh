# Sourced by .ci/run before the engine tier. BuildKit for the tests of the BuildKit path
# (tests/integration/test_buildkit.py): GitHub's ubuntu-latest has buildx, and there every build
# runs under BuildKit; an engine without it (Debian's docker.io) builds with the classic builder,
# which the rest of the suite exercises, and the BuildKit tests get Debian's buildx plugin in a
# private Docker config folder (DOCKER_CONFIG), so only they use it. Exports
# SETUPBOT_TEST_BUILDX_CONFIG: that folder, or empty when the engine's own CLI has buildx.
# Needs no root: apt's index and the package land in a temporary folder.
if docker buildx version >/dev/null 2>&1; then
    echo "ci: the engine's CLI has buildx: every build runs under BuildKit"
    export SETUPBOT_TEST_BUILDX_CONFIG=
else
    buildx_dir="$HOME/.cache/setupbot-ci/buildx"
    if [ ! -x "$buildx_dir/cli-plugins/docker-buildx" ]; then
        # the host's own Debian mirror; buildx is packaged from trixie on (a static Go binary)
        mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
        [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
        buildx_tmp=$(mktemp -d /tmp/setupbot-ci-buildx.XXXXXX)
        chmod 755 "$buildx_tmp"  # apt fetches as its own _apt user where it can
        mkdir -p "$buildx_tmp/lists/partial" "$buildx_tmp/cache/archives/partial"
        echo "deb ${mirror%/} trixie main" >"$buildx_tmp/sources.list"
        apt_opts=(-o "Dir::Etc::SourceList=$buildx_tmp/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=$buildx_tmp/lists" -o "Dir::Cache=$buildx_tmp/cache" -o "Debug::NoLocking=1")
        apt-get "${apt_opts[@]}" update -qq
        (cd "$buildx_tmp" && apt-get "${apt_opts[@]}" download docker-buildx >/dev/null)
        dpkg-deb -x "$buildx_tmp"/docker-buildx_*.deb "$buildx_tmp/root"
        mkdir -p "$buildx_dir/cli-plugins"
        cp "$buildx_tmp/root/usr/libexec/docker/cli-plugins/docker-buildx" "$buildx_dir/cli-plugins/"
        rm -rf "$buildx_tmp"
    fi
    DOCKER_CONFIG="$buildx_dir" docker buildx version
    export SETUPBOT_TEST_BUILDX_CONFIG="$buildx_dir"
fi
