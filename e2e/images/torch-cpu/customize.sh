#!/bin/sh
# Finishes kiln.local/torch-cpu's root filesystem after debootstrap: $1 is its directory.
set -eu
cd "$1"

# Debian bookworm's python3-torch (1.13) predates Python 3.11, whose Flag enums no longer
# iterate over NONE (0) or composite members: torchrun's Std.from_str("0"), the default of
# --redirects and --tee, returns None and every torchrun dies in to_map(). Look the member
# up by value instead, as later PyTorch releases do.
api=usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py
grep -q 'for s in Std:$' "$api"
sed -i 's/for s in Std:$/for s in Std.__members__.values():/' "$api"
grep -q 'for s in Std.__members__.values():' "$api"

# Nothing an image needs: downloaded packages, package lists, documentation, logs.
rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* usr/share/doc usr/share/man usr/share/info \
	usr/share/locale var/log/* var/cache/ldconfig/aux-cache
