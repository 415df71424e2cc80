"""Write the sample data the project ships in data/sample/: a small corpus and one evalset per format.

The corpus is the internal knowledge base of a fictional observatory, Kestrel Ridge Observatory:
English Markdown notes (nested folders, nested headings, fenced code), Russian notes, Chinese notes
and text files, and a bilingual five-page PDF annual report. Every text is written here; this file
is the source of truth and `data/sample/` is its output.

The evalsets exercise every field of every seed format. Chunk-id labels (seed 001 gold_chunk_ids,
seed 004 relevant_chunk_ids) are not written by hand: the corpus is loaded and chunked with the
project's own loader and default chunking, and each label is the id of the chunks that contain a
given snippet, so the labels always match the shipped chunker. A snippet found in no chunk stops
the script.

Usage: python scripts/make_sample_data.py [OUT_DIR]   (default: data/sample of this repository)
Running it twice gives byte-identical files.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from fpdf import FPDF

from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.gold import normalise_for_match
from rag_eval_assets.corpus.load import load_corpus

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "sample"
CORPUS_ID = "sample"
CHUNKER_PARAMS = ChunkerParams(chunk_size_chars=800, overlap_chars=100)
# The font matplotlib ships covers Cyrillic, and pinning matplotlib pins the font bytes, which
# the PDF embeds (subset): same font, same PDF.
FONT = Path(matplotlib.__file__).parent / "mpl-data/fonts/ttf/DejaVuSans.ttf"
# fpdf2 stamps the creation time into the PDF; a fixed one keeps the file byte-identical.
PDF_CREATION_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)

# Corpus paths (rel_path = doc_id).
HANDBOOK = "notes/Handbook.md"
SAFETY = "notes/Safety.md"
NIGHT_SHIFT = "notes/Operations/Night Shift.md"
DOME_MAINTENANCE = "notes/Operations/Dome Maintenance.md"
MAINTENANCE_LOG = "notes/Operations/Maintenance Log 2025.md"
DEPLOY = "notes/Software/Deploy.md"
DATA_PIPELINE = "notes/Software/Data Pipeline.md"
RU_CRYOSTAT = "ru/kriostat.md"
RU_PROPOSALS = "ru/zayavki.md"
ZH_PARTNERSHIP = "zh/partnership.txt"
ZH_VISITOR_GUIDE = "zh/visitor-guide.txt"
ZH_STUDENT_PROGRAM = "zh/student-program.md"
ANNUAL_REPORT = "docs/annual-report-2025.pdf"

# The Markdown notes and text files, rel_path -> text.
CORPUS_TEXTS: dict[str, str] = {
    HANDBOOK: """\
# Kestrel Ridge Observatory Handbook

This handbook is the front page of the internal knowledge base of Kestrel Ridge Observatory (KRO).
It tells new staff where things are, who decides what, and which note to read next. Every note has
an owner; if a note is wrong, tell its owner rather than editing around it.

## About the observatory

### Site

The observatory sits on Kestrel Ridge at an elevation of 2,140 m, 46 km by road from the town of
Harlow Falls. The last 11 km above the village of Birchgate are gravel. From 15 November to 31 March
the gravel section is closed to private cars, and staff travel up in the observatory's tracked
snowcat, which everyone calls "Pika". Pika leaves the Birchgate depot at 14:00 and 16:30 on working
days; book a seat with the operations desk by 12:00 the same day.

The mountain has 4 buildings: the Aquila dome, the Merlin enclosure, the control building (control
room, workshop, kitchen) and the dormitory with 14 beds.

### History

- 1987: the Harlow Falls Astronomical Trust founds the observatory.
- 14 September 1991: first light of the 1.2 m Aquila telescope.
- 2009: the control room moves out of the dome into the new control building.
- 2016: the 0.4 m robotic telescope Merlin is commissioned.
- 2023: a five-year partnership with Yunling University starts (see the Chinese notes in zh/).

### Telescopes and instruments

- **Aquila**: 1.2 m Ritchey-Chretien reflector, f/8, on a fork mount. Instruments: the FALCON-S
  long-slit spectrograph (resolution R = 5,000) and, since June 2025, the Ember 4K CCD camera.
- **Merlin**: 0.4 m robotic telescope with a filter wheel of 7 filters; it runs the asteroid
  follow-up programme without an observer on site.
- **Skywatch**: the all-sky camera on the control building roof; its cloud map refreshes every
  2 minutes and feeds the weather decision described in Operations/Night Shift.

## People and contacts

### Leadership

- Director: Dr. Maren Holt (since 2019)
- Head of operations: Tomasz Wirth
- Head of software: Priya Natarajan
- Safety officer: Elena Sokolova
- Partnership coordinator for Yunling University: Dr. Li Wen

### Who to call

| What | Who | Extension |
| --- | --- | --- |
| Control room (24/7 during observing nights) | observer on duty | 4400 |
| Emergency on the mountain | safety officer on call | 4410 |
| Operations desk, Pika bookings | Tomasz Wirth | 4420 |
| Software on-call | Priya Natarajan's team | 4430 |

## How this knowledge base is organised

- `notes/Operations/`: night shifts, dome maintenance and the 2025 maintenance log.
- `notes/Software/`: deploying the telescope control software and the data pipeline.
- `notes/Safety.md`: cryogenics, working at height, emergencies.
- `ru/`: procedures of the cryostat team and the rules for proposals, in Russian.
- `zh/`: materials for the Yunling University partnership, in Chinese.
- `docs/annual-report-2025.pdf`: the bilingual (Russian and English) annual report for 2025.
""",
    SAFETY: """\
# Safety Rules

Owner: Elena Sokolova, safety officer. These rules apply to staff, students and visiting
observers alike.

## General

- Never work alone in the domes or the workshop: the buddy rule of the night shift applies day and
  night.
- Report every incident and near miss to the safety officer within 24 hours.

## Cryogenics

### Liquid nitrogen

The FALCON-S spectrograph dewar is filled with liquid nitrogen every 36 hours (the procedure is
in ru/kriostat.md). Wear a face shield and cryogenic gloves, and never carry the transport dewar
in the lift. The oxygen monitor in the instrument room alarms when oxygen drops below 19.5
percent: leave the room at once and do not go back in until the safety officer says so.

## Working at height

Climbing inside the dome needs a harness clipped to the rail, a second person at the foot of the
ladder and wind below 10 m/s. Nobody climbs at night.

## Emergencies

Call extension 4410. The nearest hospital is Harlow Falls General, 52 minutes by road in summer;
in winter the snowcat makes it about 2 hours, so serious cases go by the air ambulance, which can
land on the helipad next to the dormitory. The defibrillator (AED) hangs in the control room next
to the door.
""",
    NIGHT_SHIFT: """\
# Night Shift Procedures

Owner: Tomasz Wirth. Applies to every night on which Aquila observes with an observer on site.

## Shift schedule

Each night is covered by two people: the observer on duty and a second person on the mountain
(the "buddy"), who may be asleep in the dormitory but must be reachable on the radio. The shift
runs from 18:00 to 06:30. The handover meeting starts at 17:45 in the control room; the day crew
reports open maintenance work and the observer reads the weather forecast aloud.

## Opening the dome

The observer alone decides whether the dome opens, and nobody may overrule a decision to close.

### Weather limits

The dome may be opened only when all of the following hold, as read from the weather mast next
to the Aquila dome and not from a phone app. Relative humidity must be below 85 percent; once it
reaches 90 percent the dome is closed at once, and it may reopen only after humidity has stayed
below 85 percent for 20 minutes. Sustained wind must be below 15 m/s and gusts below 20 m/s,
measured as the 5-minute average and the 5-minute maximum on the mast. The difference between air
temperature and dew point must be at least 2 degrees C, because below that margin dew forms on the
secondary mirror within minutes. The rain sensor must have reported no precipitation for the last
30 minutes; a single drop resets the 30-minute clock.

Cloud is not a closing criterion on its own: thin cloud does no harm to the telescope, and
spectroscopy of bright targets goes on through it. Skywatch is used to judge whether the night
is worth opening for, not whether it is safe. Dust is different: when the particle counter on the
mast shows more than 150 micrograms per cubic metre (Saharan dust reaches the ridge a few times a
year), the dome stays closed whatever the other readings are, because dust on the primary mirror
costs us a re-aluminising.

When a limit is close, wait rather than open for a short window. The rule of thumb of the
operations team is that opening for less than 45 minutes of usable sky is not worth the thermal
shock to the mirror. If readings cross a limit while open, close first and write the log entry
afterwards. A closure for weather is never an incident; a dome left open in rain always is, and
it is reported to the safety officer within 24 hours.

### Opening sequence

1. Check the weather limits above and write them into the night log.
2. Switch on the dome fans 30 minutes before opening to equalise the temperature.
3. Open the shutter to 50 percent, wait 2 minutes, then open fully.
4. Lower the wind screen only if the wind is below 8 m/s.
5. Remove the mirror covers from the control room (never by hand at night).

## During the night

### Logging

Every night has a log in the electronic logbook "Nightbook". Write an entry at least once an hour
and at every opening, closing, fault and change of target. Weather readings go into the log with
the time in UTC, not local time. The log is closed at the end of the shift and cannot be edited
afterwards; corrections are new entries.

### Faults

If the telescope stops tracking or the dome does not respond, close the shutter with the manual
button in the control room and call software on-call (extension 4430). Never climb into the dome
at night to free a jammed shutter: that is work at height and follows notes/Safety.md.

## Closing and handover

Close the dome by 06:00 at the latest, park Aquila at the zenith with the covers closed, and send
the morning report to ops@kestrel-ridge.example by 07:00. The report lists hours open, hours lost
to weather and hours lost to faults.
""",
    DOME_MAINTENANCE: """\
# Dome Maintenance

Last reviewed: 2023-05-04 by Tomasz Wirth. For changes made since then see the Maintenance Log 2025.

## Shutter

### Lubrication

Lubricate the shutter rails and the rack every 60 days with KR-7 lithium complex grease. Clean
off the old grease with a lint-free cloth first; never mix greases. One cartridge of 400 g covers
both rails. Record the date on the card inside the dome door.

### Drive motor

The shutter drive motor was last replaced on 2021-10-02. The spare motor (part number SD-4471) is
stored on the second shelf of the workshop. Replacing it takes two people and about 5 hours.

## Rotation

### Bogie wheels

The dome turns on 12 bogie wheels. Inspect them every 6 months for flat spots and cracks, and
measure the wheel gap with the feeler gauge: more than 3 mm means the wheel must be re-shimmed.

## Annual shutdown

The observatory stops observing for two weeks every August for maintenance that needs the dome
closed for days, such as recoating mirrors or replacing the shutter drive. The dates are set by
the head of operations before 1 March.
""",
    MAINTENANCE_LOG: """\
# Maintenance Log 2025

Owner: Tomasz Wirth. Newest decisions first; entries are never deleted.

## Changes to the schedule

From 2025-02-10 the shutter rails are lubricated every 90 days instead of every 60 days. The
change follows the switch from KR-7 lithium complex grease to the synthetic grease SG-220, which
the manufacturer rates for 120 days at our temperatures; 90 days keeps a margin. Approved by
Tomasz Wirth. The note Dome Maintenance still shows the old 60-day interval and will be revised at
its next review.

## Entries

### 2025-03-14 Shutter drive

The shutter drive motor failed during the night of 13 to 14 March and the shutter was closed with
the manual crank. The spare motor SD-4471 was fitted the same day, which leaves no spare on site;
a new spare was ordered on 2025-03-17 and arrived on 2025-04-29.

### 2025-06-18 Ember 4K camera

The Ember 4K CCD camera replaced the old camera on Aquila. Its detector is cooled to -100 degrees
C by a closed-cycle cooler, so it needs no liquid nitrogen. First images were taken the same
night.

### 2025-08-04 Annual shutdown

The annual shutdown ran from 4 to 15 August 2025. The Aquila primary mirror was re-aluminised
for the first time since 2019, and all 12 bogie wheels were re-shimmed.
""",
    DEPLOY: """\
# Deploying kestrelctl

Owner: Priya Natarajan.

## Overview

kestrelctl is the telescope control service: it points Aquila, drives the dome and talks to the
instruments. It is a Python 3.11 application that runs on the control host tcs-01 under systemd,
as the unit kestrelctl.service. Releases are numbered like v4.2.0 and built from the main branch.

## Release procedure

### Preconditions

- Deploy only in the window Tuesday to Thursday, 10:00 to 15:00 local time, never on an
  observing night after 15:00.
- The release must have passed the simulator test suite (make sim-test) on the build server.
- Tell the control room (extension 4400) before and after the deploy.

### Steps

```bash
# 1. Tag the release on main
git tag -a v4.2.0 -m "kestrelctl 4.2.0"
git push origin v4.2.0

# 2. Build the wheel on the build server
make wheel VERSION=4.2.0

# 3. Deploy to the control host and restart the service
ansible-playbook deploy.yml -l tcs-01 -e version=4.2.0
```

After the playbook finishes, run kestrelctl selftest on tcs-01; it moves the dome by 5 degrees
and back and reads every instrument's status. A deploy without a passing selftest is rolled back.

## Rollback

Run kestrelctl rollback --to previous on tcs-01. The host keeps the last 3 releases in
/opt/kestrelctl/releases, so a rollback never needs the build server.

## Configuration

### Environment variables

- KESTREL_DOME_TIMEOUT: seconds to wait for the dome to reach a position, default 120.
- KESTREL_SITE_ELEVATION: 2140, used for refraction corrections.
- KESTREL_LOG_DIR: /var/log/kestrelctl; logs are rotated daily and kept for 30 days.
""",
    DATA_PIPELINE: """\
# Data Pipeline

Owner: Priya Natarajan. How a frame gets from the camera to the archive.

## From telescope to archive

### File naming

Every raw frame is written by the camera computer as a FITS file whose name says where and when
it was taken: KRO_<telescope>_<night>_<sequence>.fits. The telescope code is AQ for Aquila and ME
for Merlin. The night is the date on which the night began, in the form YYYYMMDD, so a frame taken
at 02:00 on 19 June 2025 belongs to the night 20250618. The sequence number counts from 0001 each
night and has four digits, so the forty-second frame of that night on Aquila is
KRO_AQ_20250618_0042.fits. Calibration frames use the same pattern with a suffix: _bias, _dark
or _flat before the extension.

The night rule matters because observers think in nights, not in calendar dates: "the frames of
the 18th" means everything from the evening of 18 June to the morning of 19 June. Scripts that
group frames by the DATE-OBS header instead of by the file name split a night in two at midnight
UTC, and the reduction then picks up the wrong calibration frames. Always group by the night field
of the file name. Never rename raw frames by hand; if a name is wrong, record the correct one in
the night log and let the archive keep the original. The archive refuses a file whose name does not
match the pattern, and the transfer job then leaves it in /data/incoming/rejected for a human to
look at, with a line in the transfer log that gives the reason.

FITS headers carry the observer's initials in OBSERVER, the programme code in PROGID (for example
KRO-2025B-014) and the Nightbook entry number in NBREF, so every frame can be traced back to the log
entry written when it was taken.

### Transfer

The transfer job copies new frames from the camera computer to the archive server vault-02 every
10 minutes with rsync, checks the SHA-256 checksum of each file, and only then deletes the local
copy. If vault-02 is unreachable, the camera computer has room for about 9 nights of Ember 4K
frames.

## Calibration

- Bias: 21 frames every afternoon before 17:00.
- Flats: twilight flats at dusk, 7 per filter; dome flats when the sky is cloudy.
- Darks: once a week, 10 frames of 600 s each.

The master bias is the median of the 21 bias frames:

```python
# Reduction step 1: build the master bias of one night.
# A median, not a mean, so one cosmic ray does not survive into the master.
import numpy as np

def master_bias(frames: list[np.ndarray]) -> np.ndarray:
    # frames: the 21 bias frames of the afternoon, as float32 arrays
    return np.median(np.stack(frames), axis=0)
```

## Retention

Raw frames are kept for 7 years and reduced frames for 15 years. Frames of the partner programme
of Yunling University are copied to the university within 48 hours and follow the same retention.
""",
    RU_CRYOSTAT: """\
# Обслуживание криостата FALCON-S

Ответственный: Елена Соколова. Записка для группы криогеники обсерватории Kestrel Ridge.

## Заправка жидким азотом

### Периодичность

Дьюар спектрографа FALCON-S заправляется жидким азотом каждые 36 часов, независимо от того,
идут наблюдения или нет. Объём дьюара 5,5 литра; полной заправки хватает примерно на 40 часов,
поэтому запас составляет около 4 часов, и пропускать заправку нельзя.

### Порядок заправки

Заправку выполняют двое: один работает с транспортным сосудом, второй следит за датчиком
кислорода и держит дверь приборной комнаты открытой. Перед началом оба надевают защитный щиток
и криогенные перчатки. Транспортный сосуд объёмом 25 литров привозят из склада на тележке;
в лифте его не перевозят ни при каких обстоятельствах, даже пустым.

Шланг подсоединяют к заливному штуцеру дьюара и открывают вентиль сосуда медленно, за 10–15
секунд, чтобы шланг успел охладиться. Пока шланг холодный, азот вскипает и выходит паром; это
нормально. Заправка считается законченной, когда из переливной трубки идёт ровная струя жидкости,
а не пар. Обычно это занимает от 6 до 9 минут. После этого вентиль закрывают, шланг отсоединяют
и оставляют оттаивать на подставке не менее 20 минут: холодный шланг трескается от изгиба.

Во время заправки в приборной комнате не должно быть посторонних, а дверь держат открытой
распоркой, а не рукой: второй участник должен видеть и сосуд, и датчик кислорода. Если заправку
начали, а сосуда не хватило, новый сосуд везут со склада, а дьюар не оставляют наполовину пустым
дольше чем на час.

Время заправки и показание уровнемера записывают в журнал криостата и в Nightbook. Если
уровнемер после заправки показывает меньше 90 процентов, заправку повторяют через 30 минут,
а о неисправности сообщают Елене Соколовой. Если датчик кислорода показывает ниже 19,5 процента,
работу прекращают и покидают помещение; возвращаться можно только с разрешения ответственного
за безопасность.

Температура детектора должна держаться в пределах от минус 120 до минус 115 градусов. Если за
два часа после заправки она не вернулась в этот диапазон, наблюдения со спектрографом в эту ночь
не проводят.

## Отогрев и откачка

### Плановый отогрев

Раз в год, во время летней остановки в августе, криостат отогревают до комнатной температуры и
откачивают вакуумным насосом. Откачка длится 3 суток; давление после неё должно быть не выше
0,001 миллибара.
""",
    RU_PROPOSALS: """\
# Заявки на наблюдательное время

Ответственный: Марен Холт. Правила для наблюдателей, которые хотят получить время на телескопе
Aquila.

## Семестры и сроки

Год делится на два семестра. Семестр A длится с 1 апреля по 30 сентября, заявки на него
принимаются до 15 февраля. Семестр B длится с 1 октября по 31 марта, заявки принимаются
до 15 августа. Заявки подаются через портал KRO Proposals; опоздавшие заявки не рассматриваются.

## Распределение времени

### Доли

- 70 процентов времени Aquila распределяет комитет по конкурсу заявок;
- 20 процентов получает Юньлинский университет по договору о партнёрстве;
- 10 процентов составляет резерв директора для срочных наблюдений, например вспышек сверхновых.

### Комитет по распределению времени

В комитет входят пять человек: три внешних эксперта и два сотрудника обсерватории. Председатель
комитета в 2025 году — профессор Ингрид Ларсен. Комитет ставит каждой заявке оценку от 1 до 5;
время получают заявки с оценкой не ниже 3,5.

## Отчёты

Через 6 месяцев после окончания семестра руководитель программы сдаёт короткий отчёт: сколько
ночей получено, сколько потеряно из-за погоды и какие публикации подготовлены.
""",
    ZH_PARTNERSHIP: """\
云岭大学与 Kestrel Ridge 天文台合作协议摘要

云岭大学天文系与 Kestrel Ridge 天文台（KRO）于2023年9月12日签署合作协议，协议期限为五年，到2028年9月11日为止。根据协议，云岭大学每年获得 Aquila 望远镜百分之二十的观测时间，大约相当于四十个观测夜。这部分时间由云岭大学自己的委员会分配，KRO 不参与评审，但观测必须遵守天文台的夜班规定和安全规定。

云岭大学的观测数据在拍摄后四十八小时内复制到大学的服务器，原始数据在 KRO 档案中同样保存七年。双方每年十一月举行一次联合工作会议，地点在 Harlow Falls 和昆明之间轮换。协议的联络人是李文博士，她负责安排学生实习和观测者的上山行程。

协议还规定，使用 KRO 数据发表的论文必须在致谢中写明 Kestrel Ridge 天文台和 Aquila 望远镜。如果任何一方想要提前终止协议，需要提前十二个月书面通知对方。
""",
    ZH_VISITOR_GUIDE: """\
公众开放夜参观指南

Kestrel Ridge 天文台在每月第二个星期六举行公众开放夜，十一月到三月山路封闭期间暂停。每次最多接待四十位参观者，参观免费，但必须提前在网上预约，预约在活动前一周的星期一开放。参观者需要自行开车到 Birchgate 村的停车场，天文台的班车在晚上七点从停车场出发。

开放夜的活动包括参观 Aquila 望远镜圆顶、在控制楼听一场三十分钟的讲座，以及天气晴好时用一台小型望远镜观看月亮和行星。为了不影响科学观测，参观者不能进入控制室，也不能使用闪光灯拍照。山上夜间气温常常比山下低十度以上，即使在夏天也请带上厚外套。十二岁以下的儿童必须由成人陪同。
""",
    ZH_STUDENT_PROGRAM: """\
# 暑期学生实习项目

负责人：李文博士。本项目面向云岭大学天文系的本科生和研究生。

## 申请

### 名额与时间

每年提供六个实习名额，实习期为七月一日到八月三十一日，共九周。申请截止日期是每年三月三十一日，录取结果在四月底公布。申请材料包括简历、一封推荐信和一页研究兴趣说明。

### 费用

天文台提供山上宿舍的住宿和每周一次往返 Harlow Falls 的交通，学生自己负担从昆明到 Harlow Falls 的机票。

## 实习内容

### 第一周：安全培训

所有实习生在第一周必须完成安全培训，包括液氮操作、高空作业和紧急情况处理，考核通过后才能进入圆顶和仪器室。

### 研究项目

每个学生跟随一位导师完成一个小型研究项目，通常使用 Merlin 机器人望远镜的小行星观测数据。实习结束时，学生在八月的最后一个星期五做二十分钟的报告。
""",
}

# The annual report: one (Russian, English) pair of paragraphs per page, so every page has its own facts.
PDF_TITLE = "Годовой отчёт KRO 2025 / KRO Annual Report 2025"
PDF_PAGES = (
    (
        "1. Итоги года / The year in brief",
        "В 2025 году обсерватория Kestrel Ridge провела 214 ясных наблюдательных ночей; это на 19 "
        "ночей больше, чем в 2024 году. Отчёт подготовлен директором обсерватории Марен Холт и "
        "утверждён попечительским советом 20 января 2026 года.",
        "In 2025 Kestrel Ridge Observatory had 214 clear observing nights, 19 more than in 2024. "
        "The report was prepared by the director, Dr. Maren Holt, and approved by the board of "
        "trustees on 20 January 2026.",
    ),
    (
        "2. Финансы / Finances",
        "Бюджет обсерватории в 2025 году составил 61,4 млн рублей. Гранты дали 38 процентов "
        "бюджета, взносы фонда Harlow Falls Astronomical Trust — 47 процентов, партнёрство с "
        "Юньлинским университетом — 15 процентов. Расходы на электроэнергию выросли до 6,8 млн рублей.",
        "The 2025 budget was 61.4 million roubles: grants 38 percent, the Harlow Falls Astronomical "
        "Trust 47 percent and the Yunling University partnership 15 percent. Electricity costs rose "
        "to 6.8 million roubles.",
    ),
    (
        "3. Телескопы и приборы / Telescopes and instruments",
        "Телескоп Aquila был готов к работе 93,7 процента запланированного времени. 18 июня 2025 "
        "года на нём установлена новая ПЗС-камера Ember 4K. Роботизированный телескоп Merlin "
        "отработал 1912 часов.",
        "Aquila was available for 93.7 percent of scheduled time. The Ember 4K CCD camera was "
        "installed on Aquila on 18 June 2025. The robotic telescope Merlin observed for 1,912 hours.",
    ),
    (
        "4. Научные результаты / Science",
        "По данным обсерватории опубликовано 27 статей в рецензируемых журналах. Открыты три "
        "сверхновые, первая из них — SN 2025kra. Программа Merlin дала 1340 астрометрических "
        "измерений малых планет.",
        "Observatory data appeared in 27 refereed papers. Three supernovae were discovered, the "
        "first of them SN 2025kra. The Merlin programme delivered 1,340 astrometric measurements of "
        "minor planets.",
    ),
    (
        "5. Безопасность и планы на 2026 год / Safety and plans for 2026",
        "В 2025 году не было ни одного происшествия с потерей рабочего времени; зарегистрировано 4 "
        "случая, близких к происшествию. В 2026 году планируется заменить привод створки купола "
        "Aquila (смета 4,2 млн рублей) и установить вторую всенебесную камеру.",
        "There were no lost-time incidents in 2025 and 4 near misses were recorded. Plans for 2026: "
        "replace the Aquila dome shutter drive (estimate 4.2 million roubles) and install a second "
        "all-sky camera.",
    ),
)


# --- writing the corpus -------------------------------------------------------------------------


class _AnnualReport(FPDF):
    def footer(self) -> None:
        # "стр. N" on every page: the citation form seed 000 asks answers to use.
        self.set_y(-15)
        self.set_font("DejaVu", size=9)
        self.cell(0, 10, f"Годовой отчёт KRO 2025 — стр. {self.page_no()} / page {self.page_no()}", align="C")


def write_pdf(path: Path) -> None:
    pdf = _AnnualReport(format="A4")
    pdf.set_creation_date(PDF_CREATION_DATE)
    pdf.set_title(PDF_TITLE)
    pdf.set_author("Kestrel Ridge Observatory")
    pdf.add_font("DejaVu", fname=str(FONT))
    for heading, russian, english in PDF_PAGES:
        pdf.add_page()
        pdf.set_font("DejaVu", size=16)
        pdf.multi_cell(0, 10, heading, align="L")
        pdf.ln(4)
        pdf.set_font("DejaVu", size=11)
        # Left-aligned: justified lines are padded with spaces that pypdf extracts as double spaces.
        pdf.multi_cell(0, 6, russian, align="L")
        pdf.ln(4)
        pdf.multi_cell(0, 6, english, align="L")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")


def write_corpus(corpus_dir: Path) -> None:
    for rel_path, text in CORPUS_TEXTS.items():
        write_text(corpus_dir / rel_path, text)
    write_pdf(corpus_dir / ANNUAL_REPORT)


# --- chunk-id labels ----------------------------------------------------------------------------


def chunk_ids_containing(chunks: pd.DataFrame, rel_path: str, snippet: str) -> list[str]:
    """Ids of the chunks of `rel_path` that contain `snippet` (compared as gold resolution compares).

    Every such chunk answers, so all are gold; a snippet in an overlap gives two.
    """
    wanted = normalise_for_match(snippet)
    in_file = chunks[chunks["rel_path"] == rel_path]
    found = [cid for cid, text in zip(in_file["chunk_id"], in_file["text"]) if wanted in normalise_for_match(text)]
    if not found:
        raise ValueError(f"snippet {snippet!r} is in no chunk of {rel_path!r}")
    return found


def chunk_ids(chunks: pd.DataFrame, *anchors: tuple[str, str]) -> list[str]:
    """The chunk ids of several (rel_path, snippet) anchors, in order, without repeats."""
    ids: list[str] = []
    for rel_path, snippet in anchors:
        ids.extend(cid for cid in chunk_ids_containing(chunks, rel_path, snippet) if cid not in ids)
    return ids


def support(rel_path: str, heading_path: str, *snippets: str) -> dict[str, Any]:
    """A seed 002 gold_supports entry (snippets left out when none are given, as the seed allows)."""
    entry: dict[str, Any] = {"rel_path": rel_path, "heading_path": heading_path}
    if snippets:
        entry["snippets"] = list(snippets)
    return entry


# --- seed 000: questions.jsonl, rule-scored answers over the annual report -----------------------


def seed000_questions() -> list[dict[str, Any]]:
    return [
        {
            "id": "q001",
            "question": "Сколько ясных наблюдательных ночей было у обсерватории в 2025 году?",
            "must_include": ["214"],
            "must_not_include": ["195"],  # the 2024 figure (214 - 19): a model that subtracts wrongly
            "require_citation": True,
            "weight": 1.0,
        },
        {
            "id": "q002",
            "question": "Каким был бюджет обсерватории Kestrel Ridge в 2025 году?",
            "must_include_any": [["61,4 млн", "61.4 million", "61,4 миллиона"]],
            "require_citation": True,
            "weight": 2.0,
        },
        {
            "id": "q003",
            "question": "Какую долю бюджета 2025 года дали гранты?",
            "must_include": ["38"],
            "must_include_any": [["грант", "grant"]],
        },
        {
            "id": "q004",
            "question": "Когда на телескопе Aquila установили новую камеру и как она называется?",
            "must_include_any": ["Ember 4K", ["18 июня", "18 June", "2025-06-18"]],
            "require_citation": True,
        },
        {
            "id": "q005",
            "question": "Сколько статей в рецензируемых журналах вышло по данным обсерватории в 2025 году?",
            "must_include": ["27"],
            "must_not_include": ["XX", "??"],
            "weight": 1.0,
        },
        {
            "id": "q006",
            "question": "Как называется первая сверхновая, открытая обсерваторией в 2025 году?",
            "must_include": ["SN 2025kra"],
            "require_citation": True,
            "weight": 1.5,
        },
        {
            "id": "q007",
            "question": "Во сколько оценивается замена привода створки купола, запланированная на 2026 год?",
            "must_include_any": [["4,2 млн", "4.2 million", "4,2 миллиона"]],
            "must_not_include": ["61,4"],
            "require_citation": True,
            "weight": 0.5,
        },
        {
            "id": "q008",
            "question": "Сколько часов отработал телескоп Merlin в 2025 году?",
            "must_include_any": [["1912", "1 912", "1,912"]],
            "must_not_include": ["93,7"],
            "require_citation": False,
        },
    ]


# --- seed 001: evalset.jsonl, retrieval labels by document and chunk ------------------------------


def seed001_questions(chunks: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "id": "e01",
            "question": "What is kestrelctl?",
            "gold_doc_ids": [DEPLOY],
            "gold_chunk_ids": chunk_ids(chunks, (DEPLOY, "kestrelctl is the telescope control service")),
            "type": "definition",
            "notes": "Definition in the Overview section of the deploy note.",
            "source": "manual",
        },
        {
            "id": "e02",
            "question": "Что такое семестр A?",
            "gold_doc_ids": [RU_PROPOSALS],
            "gold_chunk_ids": chunk_ids(chunks, (RU_PROPOSALS, "Семестр A длится с 1 апреля по 30 сентября")),
            "type": "definition",
            "notes": "Russian question over a Russian note.",
            "source": "manual",
        },
        {
            "id": "e03",
            "question": "What is Pika at the observatory?",
            "gold_doc_ids": [HANDBOOK],
            "gold_chunk_ids": chunk_ids(chunks, (HANDBOOK, 'which everyone calls "Pika"')),
            "type": "definition",
            "notes": "Pika is the tracked snowcat; only the handbook mentions it.",
            "source": "staff-faq",
        },
        {
            "id": "e04",
            "question": "At what relative humidity must an open dome be closed?",
            "gold_doc_ids": [NIGHT_SHIFT],
            "gold_chunk_ids": chunk_ids(chunks, (NIGHT_SHIFT, "reaches 90 percent the dome is closed at once")),
            "type": "fact",
            "notes": "The Weather limits section is split into several chunks; only the first holds the answer.",
            "source": "manual",
        },
        {
            "id": "e05",
            "question": "How often is the FALCON-S dewar filled with liquid nitrogen?",
            "gold_doc_ids": [SAFETY, RU_CRYOSTAT],
            "gold_chunk_ids": chunk_ids(
                chunks,
                (SAFETY, "filled with liquid nitrogen every 36 hours"),
                (RU_CRYOSTAT, "заправляется жидким азотом каждые 36 часов"),
            ),
            "type": "fact",
            "notes": "Answered in English (Safety) and in Russian (cryostat note): a cross-lingual pair.",
            "source": "manual",
        },
        {
            "id": "e06",
            "question": "What file name does the forty-second Aquila frame of the night of 18 June 2025 get?",
            "gold_doc_ids": [DATA_PIPELINE],
            "gold_chunk_ids": chunk_ids(chunks, (DATA_PIPELINE, "KRO_AQ_20250618_0042.fits")),
            "type": "fact",
            "notes": None,
            "source": "staff-faq",
        },
        {
            "id": "e07",
            "question": "Сколько ясных наблюдательных ночей было в 2025 году?",
            "gold_doc_ids": [ANNUAL_REPORT],
            "gold_chunk_ids": chunk_ids(chunks, (ANNUAL_REPORT, "провела 214 ясных наблюдательных ночей")),
            "type": "fact",
            "notes": "Page 1 of the annual report.",
            "source": "manual",
        },
        {
            "id": "e08",
            "question": "Who is the director of Kestrel Ridge Observatory?",
            "gold_doc_ids": [HANDBOOK, ANNUAL_REPORT],
            "gold_chunk_ids": [],
            "type": "fact",
            "notes": "Chunk labels left empty on purpose: the incomplete-label case, scored by doc_hit@k only.",
            "source": "manual",
        },
        {
            "id": "e09",
            "question": "学生实习每年有几个名额？",
            "gold_doc_ids": [ZH_STUDENT_PROGRAM],
            "gold_chunk_ids": chunk_ids(chunks, (ZH_STUDENT_PROGRAM, "每年提供六个实习名额")),
            "type": "fact",
            "notes": "Chinese question over a Chinese note.",
            "source": "manual",
        },
        {
            "id": "e10",
            "question": "What are the rules for flying drones over the observatory domes?",
            "gold_doc_ids": [],
            "gold_chunk_ids": [],
            "type": "negative",
            "notes": "Nothing in the knowledge base covers drones.",
            "source": "manual",
        },
        {
            "id": "e11",
            "question": "Сколько стоит парковка в аэропорту Harlow Falls?",
            "gold_doc_ids": [],
            "gold_chunk_ids": [],
            "type": "negative",
            "notes": "Harlow Falls is mentioned often, its airport never.",
            "source": "manual",
        },
    ]


# --- seed 002: eval_set.jsonl, anchor gold, abstention and slices --------------------------------


def seed002_questions() -> list[dict[str, Any]]:
    weather = "Night Shift Procedures > Opening the dome > Weather limits"
    return [
        {
            "id": "test_001",
            "question": "What are the wind limits for opening the Aquila dome?",
            "answerable": True,
            "expected_key_facts": ["sustained wind below 15 m/s", "gusts below 20 m/s"],
            "gold_supports": [support(NIGHT_SHIFT, "# Night Shift Procedures", "Sustained wind must be below 15 m/s")],
            "required_support_groups": None,
            "recency_conflict_rule": None,
            "tags": ["work", "operations"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "factual",
            "difficulty": "easy",
        },
        {
            "id": "test_002",
            "question": "After the dome was closed for humidity, how long must humidity stay low before it may reopen?",
            "answerable": True,
            "expected_key_facts": ["humidity must stay below 85 percent", "for 20 minutes"],
            "gold_supports": [support(NIGHT_SHIFT, weather, "below 85 percent for 20 minutes")],
            "required_support_groups": None,
            "recency_conflict_rule": None,
            "tags": ["work", "operations"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "factual",
            "difficulty": "medium",
        },
        {
            "id": "test_003",
            "question": (
                "The mast reads 70 percent humidity, 9 m/s wind, a 4 degree dew point margin and dust at "
                "180 micrograms per cubic metre. May the dome be opened?"
            ),
            "answerable": True,
            "expected_key_facts": [
                "no, the dome stays closed",
                "dust above 150 micrograms per cubic metre keeps the dome closed whatever the other readings are",
            ],
            "gold_supports": [support(NIGHT_SHIFT, weather, "more than 150 micrograms per cubic metre")],
            "tags": ["work", "operations"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "reasoning",
            "difficulty": "medium",
        },
        {
            "id": "test_004",
            "question": "Как часто заправляют дьюар FALCON-S жидким азотом и какие средства защиты при этом нужны?",
            "answerable": True,
            "expected_key_facts": ["каждые 36 часов", "защитный щиток", "криогенные перчатки"],
            "gold_supports": [
                support(RU_CRYOSTAT, "Обслуживание криостата FALCON-S > Заправка жидким азотом > Периодичность",
                        "каждые 36 часов"),
                support(RU_CRYOSTAT, "Обслуживание криостата FALCON-S > Заправка жидким азотом > Порядок заправки",
                        "защитный щиток"),
                support(SAFETY, "Safety Rules > Cryogenics > Liquid nitrogen", "every 36 hours", "face shield"),
            ],
            # Both Russian sections together, or the English safety note alone, answer it.
            "required_support_groups": [[0, 1], [2]],
            "tags": ["work", "safety", "cryogenics"],
            "vaults": ["ru", "notes"],
            "folders": ["ru", "notes"],
            "category": "multi_hop",
            "difficulty": "hard",
        },
        {
            "id": "test_005",
            "question": "Who approved the change of the shutter lubrication interval, and what is that person's role?",
            "answerable": True,
            "expected_key_facts": ["Tomasz Wirth approved it", "he is head of operations"],
            "gold_supports": [
                support(MAINTENANCE_LOG, "Maintenance Log 2025 > Changes to the schedule", "Approved by Tomasz Wirth"),
                support(HANDBOOK, "Kestrel Ridge Observatory Handbook > People and contacts > Leadership",
                        "Head of operations: Tomasz Wirth"),
            ],
            "required_support_groups": [[0, 1]],
            "tags": ["work", "operations", "people"],
            "vaults": ["notes"],
            "folders": ["notes/Operations", "notes"],
            "category": "multi_hop",
            "difficulty": "hard",
        },
        {
            "id": "test_006",
            "question": "How often are the dome shutter rails lubricated?",
            "answerable": True,
            "expected_key_facts": ["every 90 days", "since 2025-02-10; it used to be every 60 days"],
            "gold_supports": [
                support(MAINTENANCE_LOG, "# Maintenance Log 2025 > ## Changes to the schedule",
                        "every 90 days instead of every 60 days"),
                support(DOME_MAINTENANCE, "Dome Maintenance > Shutter > Lubrication", "every 60 days"),
            ],
            # The 2023 note still says 60 days; the 2025 log supersedes it.
            "recency_conflict_rule": "cite_newer",
            "tags": ["work", "maintenance"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "recency/conflict",
            "difficulty": "medium",
        },
        {
            "id": "test_007",
            "question": "When was the shutter drive motor replaced?",
            "answerable": True,
            "expected_key_facts": [
                "on 2021-10-02",
                "again on 2025-03-14 after it failed",
                "the question is ambiguous without a year: both replacements should be named",
            ],
            "gold_supports": [
                support(DOME_MAINTENANCE, "Dome Maintenance > Shutter > Drive motor", "2021-10-02"),
                support(MAINTENANCE_LOG, "Maintenance Log 2025 > Entries > 2025-03-14 Shutter drive",
                        "was fitted the same day"),
            ],
            "recency_conflict_rule": None,
            "tags": ["work", "maintenance"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "adversarial",
            "difficulty": "hard",
        },
        {
            "id": "test_008",
            "question": "Since when has the Ember 4K camera been cooled with liquid nitrogen?",
            "answerable": True,
            "expected_key_facts": [
                "it is not: the premise is false",
                "a closed-cycle cooler keeps the detector at -100 degrees C, so it needs no liquid nitrogen",
            ],
            "gold_supports": [
                support(MAINTENANCE_LOG, "Maintenance Log 2025 > Entries > 2025-06-18 Ember 4K camera",
                        "so it needs no liquid nitrogen"),
            ],
            "tags": ["work", "instruments"],
            "vaults": ["notes"],
            "folders": ["notes/Operations"],
            "category": "adversarial",
            "difficulty": "hard",
        },
        {
            "id": "test_009",
            "question": "What is the boiling point of liquid nitrogen at sea level?",
            "answerable": False,
            "expected_key_facts": [],
            "gold_supports": [],
            "required_support_groups": None,
            "recency_conflict_rule": None,
            "tags": ["general"],
            "vaults": [],
            "folders": [],
            "category": "general",
            "difficulty": "easy",
        },
        {
            "id": "test_010",
            "question": "云岭大学每年获得多少 Aquila 望远镜的观测时间？",
            "answerable": True,
            "expected_key_facts": ["百分之二十的观测时间", "大约四十个观测夜"],
            "gold_supports": [support(ZH_PARTNERSHIP, "", "百分之二十的观测时间")],
            "tags": ["partnership"],
            "vaults": ["zh"],
            "folders": ["zh"],
            "category": "factual",
            "difficulty": "easy",
        },
        {
            "id": "test_011",
            "question": "暑期实习的申请截止日期是哪一天？",
            "answerable": True,
            "expected_key_facts": ["每年三月三十一日"],
            "gold_supports": [support(ZH_STUDENT_PROGRAM, "暑期学生实习项目 > 申请 > 名额与时间", "申请截止日期是每年三月三十一日")],
            "tags": ["partnership", "students"],
            "vaults": ["zh"],
            "folders": ["zh"],
            "category": "factual",
            "difficulty": "medium",
        },
        {
            "id": "test_012",
            "question": "До какого числа принимаются заявки на семестр B?",
            "answerable": True,
            "expected_key_facts": ["до 15 августа"],
            "gold_supports": [support(RU_PROPOSALS, "# Заявки на наблюдательное время", "до 15 августа")],
            "tags": ["science", "proposals"],
            "vaults": ["ru"],
            "folders": ["ru"],
            "category": "factual",
            "difficulty": "easy",
        },
        {
            "id": "test_013",
            "question": "Did the observatory have more clear nights in 2025 than in 2024? How many were there in 2024?",
            "answerable": True,
            "expected_key_facts": ["yes, 214 clear nights in 2025", "19 more than in 2024, so 195 in 2024"],
            "gold_supports": [support(ANNUAL_REPORT, "", "19 more than in 2024")],
            "tags": ["report"],
            "vaults": ["docs"],
            "folders": ["docs"],
            "category": "reasoning",
            "difficulty": "medium",
        },
        {
            "id": "test_014",
            "question": "A kestrelctl deploy finished but its selftest fails. What now? Is the build server needed?",
            "answerable": True,
            "expected_key_facts": [
                "roll back: a deploy without a passing selftest is rolled back",
                "kestrelctl rollback --to previous on tcs-01",
                "the build server is not needed: tcs-01 keeps the last 3 releases",
            ],
            "gold_supports": [
                support(DEPLOY, "Deploying kestrelctl > Release procedure > Steps",
                        "A deploy without a passing selftest is rolled back"),
                support(DEPLOY, "Deploying kestrelctl > Rollback", "never needs the build server"),
            ],
            "tags": ["work", "code"],
            "vaults": ["notes"],
            "folders": ["notes/Software"],
            "category": "reasoning",
            "difficulty": "medium",
        },
    ]


# --- seed 003: question_v2.json, structured answers with a source map ----------------------------


def seed003_questions() -> list[dict[str, Any]]:
    return [
        {
            "id": "v2-001",
            "question": "实习生第一周需要完成什么？",
            "expected": {
                "answer_example": {
                    "target_audience": "暑期实习生",
                    "main_topic": "暑期学生实习项目",
                    "sub_topic": "安全培训",
                    "detailed_description": [
                        "第一周必须完成安全培训",
                        "培训包括液氮操作、高空作业和紧急情况处理",
                        "考核通过后才能进入圆顶和仪器室",
                    ],
                    "original_evidence": (
                        "所有实习生在第一周必须完成安全培训，包括液氮操作、高空作业和紧急情况处理，"
                        "考核通过后才能进入圆顶和仪器室。"
                    ),
                    "predicted_questions": ["实习生什么时候参加安全培训？", "没有通过安全考核可以进入圆顶吗？"],
                },
                "source_map": [{"file": ZH_STUDENT_PROGRAM, "anchors": ["第一周必须完成安全培训"]}],
            },
        },
        {
            "id": "v2-002",
            "question": "公众开放夜每次可以接待多少人？需要付费吗？",
            "expected": {
                "answer_example": {
                    "target_audience": "公众参观者",
                    "main_topic": "公众开放夜",
                    "sub_topic": "名额与预约",
                    "detailed_description": [
                        "每次最多接待四十位参观者",
                        "参观免费",
                        "必须提前在网上预约",
                        "预约在活动前一周的星期一开放",
                    ],
                    "original_evidence": (
                        "每次最多接待四十位参观者，参观免费，但必须提前在网上预约，预约在活动前一周的星期一开放。"
                    ),
                    "predicted_questions": ["开放夜什么时候举行？", "怎样预约开放夜？", "冬天有开放夜吗？"],
                },
                "source_map": [{"file": ZH_VISITOR_GUIDE, "anchors": ["每次最多接待四十位参观者", "参观免费"]}],
            },
        },
        {
            "id": "v2-003",
            "question": "云岭大学和天文台的合作协议什么时候到期？提前终止需要什么条件？",
            "expected": {
                "answer_example": {
                    "target_audience": "合作项目负责人",
                    "main_topic": "云岭大学合作协议",
                    "sub_topic": "协议期限与终止",
                    "detailed_description": [
                        "协议于2023年9月12日签署",
                        "期限五年，到2028年9月11日为止",
                        "提前终止需要提前十二个月书面通知对方",
                    ],
                    "original_evidence": (
                        "协议期限为五年，到2028年9月11日为止。如果任何一方想要提前终止协议，需要提前十二个月书面通知对方。"
                    ),
                    "predicted_questions": ["合作协议是哪一天签署的？", "协议可以提前终止吗？"],
                },
                "source_map": [
                    {"file": ZH_PARTNERSHIP, "anchors": ["到2028年9月11日为止"]},
                    # A bare file name is resolved to the one rel_path it is the base name of.
                    {"file": "partnership.txt", "anchors": ["需要提前十二个月书面通知对方"]},
                ],
            },
        },
        {
            "id": "v2-004",
            "question": "How available was Aquila in 2025, and when did it get its new camera?",
            "expected": {
                "answer_example": {
                    "target_audience": "observatory management",
                    "main_topic": "annual report 2025",
                    "sub_topic": "telescopes and instruments",
                    "detailed_description": [
                        "Aquila was available for 93.7 percent of scheduled time",
                        "the Ember 4K CCD camera was installed on 18 June 2025",
                        "Merlin observed for 1,912 hours",
                    ],
                    "original_evidence": (
                        "Aquila was available for 93.7 percent of scheduled time. The Ember 4K CCD camera was "
                        "installed on Aquila on 18 June 2025."
                    ),
                    "predicted_questions": [
                        "What was Aquila's uptime in 2025?",
                        "Which camera does Aquila use since 2025?",
                    ],
                },
                "source_map": [{"file": ANNUAL_REPORT, "page": 3, "anchors": ["93.7 percent", "Ember 4K"]}],
            },
        },
        {
            "id": "v2-005",
            "question": "Какие работы обсерватория планирует на 2026 год и сколько они стоят?",
            "expected": {
                "answer_example": {
                    "target_audience": "попечительский совет",
                    "main_topic": "годовой отчёт 2025",
                    "sub_topic": "планы на 2026 год",
                    "detailed_description": [
                        "заменить привод створки купола Aquila",
                        "смета замены привода 4,2 млн рублей",
                        "установить вторую всенебесную камеру",
                    ],
                    "original_evidence": (
                        "В 2026 году планируется заменить привод створки купола Aquila (смета 4,2 млн рублей) "
                        "и установить вторую всенебесную камеру."
                    ),
                    "predicted_questions": ["Что планируется заменить в 2026 году?", "Сколько стоит замена привода?"],
                },
                "source_map": [{"file": ANNUAL_REPORT, "page": 5, "anchors": ["смета 4,2 млн рублей"]}],
            },
        },
        {
            "id": "v2-006",
            "question": "What does the name of a raw frame file encode?",
            "expected": {
                "answer_example": {
                    "target_audience": "observers and pipeline developers",
                    "main_topic": "data pipeline",
                    "sub_topic": "file naming",
                    "detailed_description": [
                        "the pattern is KRO_<telescope>_<night>_<sequence>.fits",
                        "AQ is Aquila and ME is Merlin",
                        "the night is the date on which the night began, as YYYYMMDD",
                        "the sequence number has four digits and restarts at 0001 each night",
                    ],
                    "original_evidence": (
                        "Every raw frame is written by the camera computer as a FITS file whose name says where and "
                        "when it was taken: KRO_<telescope>_<night>_<sequence>.fits."
                    ),
                    "predicted_questions": ["Which night does a frame taken at 02:00 belong to?"],
                },
                "source_map": [
                    {"file": DATA_PIPELINE, "anchors": ["KRO_<telescope>_<night>_<sequence>.fits"]},
                ],
            },
        },
    ]


# --- seed 004: generated_queries.jsonl, queries as an LLM writes them from chunks -----------------


def seed004_queries(chunks: pd.DataFrame) -> list[dict[str, Any]]:
    def query(question: str, answer: str, qtype: str, gold: dict[str, Any]) -> dict[str, Any]:
        relevant = chunk_ids(chunks, *((gold["rel_path"], s) for s in gold["snippets"]))
        return {"question": question, "answer": answer, "relevant_chunk_ids": relevant, "type": qtype,
                "gold_supports": [gold]}

    return [
        query(
            "How many bogie wheels does the Aquila dome turn on?",
            "The dome turns on 12 bogie wheels.",
            "literal",
            support(DOME_MAINTENANCE, "Dome Maintenance > Rotation > Bogie wheels",
                    "The dome turns on 12 bogie wheels"),
        ),
        query(
            "Where does the control host keep previous kestrelctl releases?",
            "In /opt/kestrelctl/releases; the host keeps the last 3 releases.",
            "literal",
            support(DEPLOY, "Deploying kestrelctl > Rollback", "/opt/kestrelctl/releases"),
        ),
        query(
            "开放夜的班车几点从哪里出发？",
            "班车在晚上七点从 Birchgate 村的停车场出发。",
            "literal",
            support(ZH_VISITOR_GUIDE, "", "天文台的班车在晚上七点从停车场出发"),
        ),
        query(
            "For how long does the observatory keep unprocessed frames?",
            "Raw frames are kept for 7 years.",
            "paraphrase",
            support(DATA_PIPELINE, "Data Pipeline > Retention", "Raw frames are kept for 7 years"),
        ),
        query(
            "Сколько человек должны участвовать в доливке азота в криостат?",
            "Двое: один работает с транспортным сосудом, второй следит за датчиком кислорода.",
            "paraphrase",
            support(RU_CRYOSTAT, "Обслуживание криостата FALCON-S > Заправка жидким азотом > Порядок заправки",
                    "Заправку выполняют двое"),
        ),
        query(
            "I'm on the night shift and the rain sensor saw a single drop ten minutes ago; everything else is "
            "within limits. Can I open the dome now?",
            "No. A single drop resets the 30-minute clock: the rain sensor must report no precipitation for "
            "30 minutes before the dome may open.",
            "scenario",
            support(NIGHT_SHIFT, "Night Shift Procedures > Opening the dome > Weather limits",
                    "a single drop resets the 30-minute clock"),
        ),
        query(
            "The archive server vault-02 went down on Friday evening. How long can we keep observing with the "
            "Ember 4K before the camera computer fills up?",
            "About 9 nights: the camera computer has room for about 9 nights of Ember 4K frames.",
            "scenario",
            support(DATA_PIPELINE, "Data Pipeline > From telescope to archive > Transfer", "about 9 nights"),
        ),
        query(
            "It's Wednesday at 16:00 and there is an observing night ahead. Can I still deploy the new kestrelctl "
            "release?",
            "No. Deploys are allowed Tuesday to Thursday from 10:00 to 15:00 only, never on an observing night "
            "after 15:00.",
            "scenario",
            support(DEPLOY, "Deploying kestrelctl > Release procedure > Preconditions",
                    "Tuesday to Thursday, 10:00 to 15:00"),
        ),
    ]


# --- BEIR: queries.jsonl + qrels.tsv over the same corpus (doc ids are rel_paths) -----------------

# (query id, text, answers or None, {doc_id: grade}); grade 2 answers the query, 1 is related.
BEIR_QUERIES: tuple[tuple[str, str, list[str] | None, dict[str, int]], ...] = (
    ("b1", "dome opening humidity limit", ["85 percent"], {NIGHT_SHIFT: 2, HANDBOOK: 1}),
    ("b2", "liquid nitrogen refill interval spectrograph dewar", ["36 hours"], {SAFETY: 2, RU_CRYOSTAT: 2}),
    ("b3", "shutter rail lubrication interval", ["90 days"], {MAINTENANCE_LOG: 2, DOME_MAINTENANCE: 1}),
    ("b4", "roll back the telescope control software", None, {DEPLOY: 2}),
    (
        "b5",
        "云岭大学 Aquila 观测时间 比例",
        ["百分之二十"],
        {ZH_PARTNERSHIP: 2, RU_PROPOSALS: 2, HANDBOOK: 1},
    ),
    ("b6", "raw frame file naming convention", ["KRO_<telescope>_<night>_<sequence>.fits"], {DATA_PIPELINE: 2}),
    ("b7", "number of refereed papers in 2025", ["27"], {ANNUAL_REPORT: 2}),
    ("b8", "emergency phone extension on the mountain", ["4410"], {SAFETY: 2, HANDBOOK: 2}),
)


def beir_files() -> tuple[str, str]:
    """(queries.jsonl text, qrels.tsv text)."""
    queries = []
    qrels = ["query-id\tcorpus-id\tscore"]
    for qid, text, answers, judged in BEIR_QUERIES:
        record: dict[str, Any] = {"_id": qid, "text": text}
        if answers is not None:
            record["answers"] = answers
        queries.append(json.dumps(record, ensure_ascii=False))
        qrels.extend(f"{qid}\t{doc_id}\t{grade}" for doc_id, grade in judged.items())
    return "\n".join(queries) + "\n", "\n".join(qrels) + "\n"


# --- writing everything ------------------------------------------------------------------------


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_evalsets(evalsets_dir: Path, chunks: pd.DataFrame) -> None:
    write_text(evalsets_dir / "questions.jsonl", jsonl(seed000_questions()))
    write_text(evalsets_dir / "evalset.jsonl", jsonl(seed001_questions(chunks)))
    write_text(evalsets_dir / "eval_set.jsonl", jsonl(seed002_questions()))
    write_text(evalsets_dir / "question_v2.json", json.dumps(seed003_questions(), ensure_ascii=False, indent=2) + "\n")
    write_text(evalsets_dir / "generated_queries.jsonl", jsonl(seed004_queries(chunks)))
    queries, qrels = beir_files()
    write_text(evalsets_dir / "beir" / "queries.jsonl", queries)
    write_text(evalsets_dir / "beir" / "qrels.tsv", qrels)


# README's tour step 5: BM25's k1 against two chunk sizes on the sample, six retrievers in one run.
SWEEP_CONFIG = """\
# A sweep on the sample (README, "A five-minute tour"): BM25's k1 against two chunk sizes, six retrievers in one run.
# Relative paths are relative to this file; its runs land in data/sweep/, apart from rag_eval.yaml's.
storage_dir: ../sweep
corpus: {id: sample, path: corpus, language: multi}
evalset: {name: sample_eval_set, path: evalsets/eval_set.jsonl}
chunking: {chunk_size_chars: 800, overlap_chars: 100}
sweep: {kind: bm25, k1: [0.3, 0.9, 1.5], chunking: [{chunk_size_chars: 300, overlap_chars: 50}, {chunk_size_chars: 800, overlap_chars: 100}]}
k_values: [1, 3, 5, 10]
answering: {k_values: [5]}
"""


def make_sample_data(out_dir: Path) -> None:
    """Write corpus/, evalsets/ and sweep.yaml under `out_dir`, replacing what was there."""
    corpus_dir = out_dir / "corpus"
    evalsets_dir = out_dir / "evalsets"
    for directory in (corpus_dir, evalsets_dir):
        # Start clean so a file dropped from this script does not linger in the output.
        if directory.exists():
            shutil.rmtree(directory)
    write_corpus(corpus_dir)
    chunks = chunk_documents(load_corpus(corpus_dir), CORPUS_ID, CHUNKER_PARAMS)
    write_evalsets(evalsets_dir, chunks)
    write_text(out_dir / "sweep.yaml", SWEEP_CONFIG)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise SystemExit("usage: python scripts/make_sample_data.py [OUT_DIR]")
    out_dir = Path(argv[0]) if argv else DEFAULT_OUT
    make_sample_data(out_dir)
    print(f"wrote {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1:])
