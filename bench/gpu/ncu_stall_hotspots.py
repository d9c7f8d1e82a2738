"""Warp-stall totals per kernel and the hottest SASS instructions per stall
reason, from an Nsight Compute report taken with PC sampling:

  ncu -o rep --kernel-name regex:"bwd_kernel|flash_bwd_dq_dk_dv" \
      --section SourceCounters --section WarpStateStats python3 bench/gpu/ncu_bwd_pair.py
  ncu -i rep.ncu-rep --page source --csv --print-source sass > DIR/src.csv
  ncu -i rep.ncu-rep --page details --print-details all > DIR/details.txt
  python3 bench/gpu/ncu_stall_hotspots.py DIR stall_long_sb,stall_short_sb,stall_math

(`bench/results/h200-sm80-bwd-pcsamp-20261201/run-pcsamp.sh` does the first three.)
"""
import csv
import io
import re
import sys

d = sys.argv[1]
txt=open(d+'/details.txt').read()
parts=re.split(r'\n  (?=\S.*\(\d+, \d+, \d+\)x\()', txt)
for p in parts[1:]:
    name=p.split('\n')[0][:70]
    tot={}
    for m in re.finditer(r'\(smsp__pcsamp_warps_issue_stalled_(\w+?)\)\s+\S+\s+([\d,]+)', p):
        if not m.group(1).endswith('not_issued'): tot[m.group(1)]=int(m.group(2).replace(',',''))
    s=sum(tot.values())
    print('==',name,'samples',s)
    print('  '+' '.join(f'{k}:{v//1000}K' for k,v in sorted(tot.items(),key=lambda kv:-kv[1]) if v/s>0.005))
txt=open(d+'/src.csv').read()
for b in txt.split('"Kernel Name"')[1:]:
    lines=b.split('\n'); rows=list(csv.DictReader(io.StringIO('\n'.join(lines[1:]))))
    print('==',lines[0][:70])
    keys = [k for k in sys.argv[2].split(',') if rows and k in rows[0]]
    if rows and len(keys) < len(sys.argv[2].split(',')):
        print('  (stall columns present:', ' '.join(k for k in rows[0] if k.startswith('stall_')), ')')
    for key in keys:
        top=sorted(rows,key=lambda r:-int(r[key] or 0))[:6]
        print(' ',key,sum(int(r[key] or 0) for r in rows))
        for r in top: print('    %6s  %s'%(r[key], r['Source'][:70]))
