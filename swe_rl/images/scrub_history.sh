#!/bin/bash
# Cut a task repo's git history at its base commit: afterwards no commit, tree, blob, tag, ref, reflog entry,
# stash, remote or worktree newer than (not reachable from) the base is left in the repository. Run at image
# build time (swe_rl/images/task_images.py) so that every sandbox of the image, agent's or grader's, starts clean.
# Usage: scrub_history.sh REPO_DIR [BASE_COMMIT]    (no BASE_COMMIT: HEAD is the base)
# A REPO_DIR that is not a git work tree is left alone (exit 0). HEAD must be the base commit (exit 3 if not):
# a checkout of a later commit would leak the future through the working tree itself.
set -euo pipefail
repo="$1"; base="${2:-}"
cd "$repo" 2>/dev/null || exit 0
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0
gd=$(git rev-parse --git-dir)
head=$(git rev-parse --verify -q HEAD) || { echo "scrub_history: $repo has no HEAD commit" >&2; exit 3; }
if [ -n "$base" ]; then
  b=$(git rev-parse --verify -q "$base^{commit}") || { echo "scrub_history: base $base not in $repo" >&2; exit 3; }
  [ "$b" = "$head" ] || { echo "scrub_history: HEAD $head is not the base commit $b" >&2; exit 3; }
fi
branch=$(git symbolic-ref -q HEAD || true)  # the checked-out branch stays (at the base); detached HEAD: none
keep=$(mktemp)
{ [ -n "$branch" ] && echo "$branch"; git for-each-ref --merged HEAD --format='%(refname)' refs/tags; } | sort -u > "$keep"
# every other ref (branches, remote-tracking refs, tags of later commits, stash, notes, replace refs, loose or packed)
git for-each-ref --format='%(refname)' | sort -u | comm -23 - "$keep" | sed 's/^/delete /' | git update-ref --stdin
rm -f "$keep"
for r in $(git remote); do git remote remove "$r"; done
# state outside refs that names or roots other commits: reflogs, *_HEAD files, other worktrees, dumb-http lists,
# commit graphs and multi-pack indexes (rewritten from what is reachable), .keep packs (repack would skip them)
rm -rf "$gd"/logs "$gd"/refs/original "$gd"/worktrees "$gd"/rebase-merge "$gd"/rebase-apply "$gd"/sequencer
rm -f "$gd"/ORIG_HEAD "$gd"/FETCH_HEAD "$gd"/MERGE_HEAD "$gd"/CHERRY_PICK_HEAD "$gd"/REVERT_HEAD "$gd"/AUTO_MERGE \
      "$gd"/BISECT_* "$gd"/info/refs "$gd"/objects/info/packs "$gd"/objects/info/commit-graph \
      "$gd"/objects/pack/multi-pack-index "$gd"/objects/pack/*.keep "$gd"/shallow
rm -rf "$gd"/objects/info/commit-graphs
# objects: one pack of what is reachable (borrowed objects copied in, then the alternates link cut); the rest goes
git repack -a -d -q
rm -f "$gd"/objects/info/alternates
git prune --expire=now
git reflog expire --expire=now --all 2>/dev/null || true
git rev-parse HEAD
