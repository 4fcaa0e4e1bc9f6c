#!/bin/bash
# coc-run --batch: the job script of one site of a coc job, for Slurm (sbatch).
# Edit freely. coc-run fills in its placeholders (a dollar sign and a lower-case name in
# braces; docs/launcher.md, "--batch"); anything else, such as $HOME or ${SLURM_JOB_ID},
# is left to the shell.
# The lines after the directives are the same for every scheduler, on purpose: each
# script stands alone (the scheduler runs this one file).
#SBATCH --job-name=coc-0123abcd-b
#SBATCH --nodes=3
#SBATCH --ntasks=3
#SBATCH --ntasks-per-node=2
#SBATCH --time=00:20:00
#SBATCH --output=coc-0123abcd-b.out
#SBATCH --partition=compute
#SBATCH --account=proj42
set -e
module load python/3.11
source /opt/coc/bin/activate
cd /scratch/me/run
# The site's agent: it connects back to coc-run's relay on the login node and starts the
# site's ranks and gateway daemons. The token lives only in this file (mode 0700).
export COC_BATCH_CALLBACK=login.b.example.org:40000 COC_BATCH_TOKEN=feedc0de
exec /opt/coc/bin/python -c 'import runpy,sys;from importlib.util import find_spec;del sys.path[:not getattr(sys.flags,"safe_path",0)];find_spec("coc") or sys.exit(print("coc:",sys.executable,"cannot import coc",file=sys.stderr) or 97);runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)' coc.launcher.batch connect
