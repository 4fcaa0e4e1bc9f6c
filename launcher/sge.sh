#!/bin/bash
# coc-run --batch: the job script of one site of a coc job, for (Son of) Grid Engine (qsub).
# Edit freely. coc-run fills in its placeholders (a dollar sign and a lower-case name in
# braces; docs/launcher.md, "--batch"); anything else, such as $HOME or ${JOB_ID},
# is left to the shell. Name the site's parallel
# environment with the profile's batch setting 'pe' (e.g. pe: "mpi 8").
# The lines after the directives are the same for every scheduler, on purpose: each
# script stands alone (the scheduler runs this one file).
#$ -N ${job_name}
#$ -S /bin/bash
#$ -cwd
#$ -j y
#$ -o ${output}
#$ -l h_rt=${walltime}
${options}
set -e
${setup}
cd ${workdir}
# The site's agent: it connects back to coc-run's relay on the login node and starts the
# site's ranks and gateway daemons (PE_HOSTFILE says where). The token lives only here.
export COC_BATCH_CALLBACK=${callback} COC_BATCH_TOKEN=${token}
exec ${connect}
