#!/bin/bash
# coc-run --batch: the job script of one site of a coc job, for (Son of) Grid Engine (qsub).
# Edit freely. coc-run fills in its placeholders (a dollar sign and a lower-case name in
# braces; docs/launcher.md, "--batch"); anything else, such as $HOME or ${JOB_ID},
# is left to the shell. Name the site's parallel
# environment with the profile's batch setting 'pe' (e.g. pe: "mpi 8").
# The lines after the directives are the same for every scheduler, on purpose: each
# script stands alone (the scheduler runs this one file).
#$ -N coc-0123abcd-b
#$ -S /bin/bash
#$ -cwd
#$ -j y
#$ -o coc-0123abcd-b.out
#$ -l h_rt=01:00:00
#$ -q all.q
#$ -pe mpi 4
#$ -l h_vmem=2G
set -e
module load python/3.11
source /opt/coc/bin/activate
cd /scratch/me/run
# The site's agent: it connects back to coc-run's relay on the login node and starts the
# site's ranks and gateway daemons (PE_HOSTFILE says where). The token lives only here.
export COC_BATCH_CALLBACK=login.b.example.org:40000 COC_BATCH_TOKEN=feedc0de
exec /opt/coc/bin/python -c 'import runpy,sys;from importlib.util import find_spec;del sys.path[:not getattr(sys.flags,"safe_path",0)];find_spec("coc") or sys.exit(print("coc:",sys.executable,"cannot import coc",file=sys.stderr) or 97);runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)' coc.launcher.batch connect
