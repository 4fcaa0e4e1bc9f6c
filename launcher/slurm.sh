#!/bin/bash
# coc-run --batch: the job script of one site of a coc job, for Slurm (sbatch).
# Edit freely. coc-run fills in its placeholders (a dollar sign and a lower-case name in
# braces; docs/launcher.md, "--batch"); anything else, such as $HOME or ${SLURM_JOB_ID},
# is left to the shell.
# The lines after the directives are the same for every scheduler, on purpose: each
# script stands alone (the scheduler runs this one file).
#SBATCH --job-name=${job_name}
#SBATCH --nodes=${nodes}
#SBATCH --ntasks=${ntasks}
#SBATCH --ntasks-per-node=${tasks_per_node}
#SBATCH --time=${walltime}
#SBATCH --output=${output}
${options}
set -e
${setup}
cd ${workdir}
# The site's agent: it connects back to coc-run's relay on the login node and starts the
# site's ranks and gateway daemons. The token lives only in this file (mode 0700).
export COC_BATCH_CALLBACK=${callback} COC_BATCH_TOKEN=${token}
exec ${connect}
