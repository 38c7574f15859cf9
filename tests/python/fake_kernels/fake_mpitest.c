/* Stand-in for nr-mpitest in the library tests: a 1 MiB ping-pong that writes a netregress-result/1 JSON.
 * Not a benchmark; it exists so the ReFrame plumbing can be tested without the real kernels. */
#include <unistd.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int c,char**v){MPI_Init(&c,&v);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);int n=1<<20;char*b=malloc(n);
const char*out="result.json";for(int i=1;i<c;i++)if(!strcmp(v[i],"--json"))out=v[i+1];
char host[256],peer[256];gethostname(host,256);
if(r==0)MPI_Recv(peer,256,MPI_CHAR,1,1,MPI_COMM_WORLD,MPI_STATUS_IGNORE);else if(r==1)MPI_Send(host,256,MPI_CHAR,0,1,MPI_COMM_WORLD);
int it=100;double t0=MPI_Wtime();
for(int i=0;i<it;i++){if(r==0){MPI_Send(b,n,MPI_CHAR,1,0,MPI_COMM_WORLD);MPI_Recv(b,n,MPI_CHAR,1,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);}else if(r==1){MPI_Recv(b,n,MPI_CHAR,0,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);MPI_Send(b,n,MPI_CHAR,0,0,MPI_COMM_WORLD);}}
double el=MPI_Wtime()-t0;double mbps=2.0*n*it*8/el/1e6;
if(!r){FILE*f=fopen(out,"w");fprintf(f,"{\"schema\":\"netregress-result/1\",\"tool\":\"nr-mpitest\",\"status\":\"ok\",\"mode\":\"pingpong\",\"hosts\":{\"master\":\"%s\",\"secondary\":\"%s\"},\"bytes\":{\"master\":%lu,\"secondary\":%lu},\"summary\":{\"throughput_mbps\":{\"avg\":%g,\"median\":%g}},\"latency\":{\"size_bytes\":8,\"iterations\":10,\"avg_us\":%g,\"min_us\":%g},\"sweep\":[",host,peer,(unsigned long)2*n*it,(unsigned long)2*n*it,mbps,mbps,el/it*1e6,el/it*1e6);
for(int e=0;e<=20;e++)fprintf(f,"%s{\"size_bytes\":%d,\"throughput_mbps\":%g,\"iterations\":1}",e?",":"",1<<e,mbps);fprintf(f,"]}\n");fclose(f);printf("done\n");}
MPI_Finalize();return 0;}
